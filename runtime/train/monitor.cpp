#include "train/monitor.h"

#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "train/atomic_file.h"
#include "train/fence.h"

namespace cifar::train {

MonitorLog::MonitorLog(const std::filesystem::path& model_dir)
    : out_(model_dir / kFileName, std::ios::app) {
  if (!out_) throw std::runtime_error("cannot open " + (model_dir / kFileName).string());
}

void MonitorLog::append(const EpochRecord& r) {
  const nlohmann::json line = {
      {"epoch", r.epoch},
      {"step", r.step},
      {"train_loss", r.train_loss},
      {"train_accuracy", r.train_accuracy},
      {"test_loss", r.test_loss},
      {"test_accuracy", r.test_accuracy},
      {"learning_rate", r.learning_rate},
      {"images_per_second", r.images_per_second},
      {"seconds", r.seconds},
  };
  check_fence();  // a replaced chief records nothing
  out_ << line.dump() << '\n' << std::flush;
}

void MonitorLog::truncate_after(const std::filesystem::path& model_dir, int64_t epoch) {
  const auto path = model_dir / kFileName;
  std::vector<std::string> kept;
  {
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);) {
      const auto record = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      // A torn last line (the process was killed mid-write) is dropped too.
      if (record.is_object() && record.value("epoch", int64_t{0}) <= epoch) kept.push_back(line);
    }
  }
  check_fence();
  replace_atomically(path, [&](const std::filesystem::path& temp) {
    std::ofstream out(temp, std::ios::trunc);
    for (const auto& line : kept) out << line << '\n';
  });
}

}  // namespace cifar::train
