// The seed-compatible command line of cifar-train, parsed into a TrainConfig.
#pragma once

#include <optional>

#include "config/train_config.h"

namespace cifar::cli {

struct ParsedCommandLine {
  std::optional<train::TrainConfig> config;  // empty: exit with `exit_code` (help or error)
  int exit_code = 0;
  bool verbose = false;
};

// Prints --help, or a clear message for a bad flag or value (exit code 2), itself.
ParsedCommandLine parse_command_line(int argc, const char* const argv[]);

}  // namespace cifar::cli
