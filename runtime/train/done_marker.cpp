#include "train/done_marker.h"

#include <fstream>
#include <nlohmann/json.hpp>

#include "train/atomic_file.h"
#include "train/fence.h"

namespace cifar::train {
namespace fs = std::filesystem;

fs::path done_marker_path(const TrainConfig& config) {
  return fs::path(config.model_dir) / (run_name(config) + ".done");
}

void write_done_marker(const TrainConfig& config, int64_t final_step) {
  check_fence();
  replace_atomically(done_marker_path(config), [&](const fs::path& temp) {
    std::ofstream(temp, std::ios::trunc) << nlohmann::json{{"step", final_step}}.dump() << "\n";
  });
}

std::optional<int64_t> read_done_marker(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  try {
    return nlohmann::json::parse(in).at("step").get<int64_t>();
  } catch (const std::exception&) {
    return std::nullopt;  // being written: the next poll reads it whole
  }
}

}  // namespace cifar::train
