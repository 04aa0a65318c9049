#include "train/stall_watch.h"

#include <filesystem>
#include <string>
#include <utility>

#include "storage/s3_location.h"
#include "train/graceful_stop.h"
#include "train/termination_log.h"

namespace cifar::train {

std::unique_ptr<health::StallWatchdog> watch_for_stalls(const TrainConfig& config) {
  const auto& dist = config.distributed;
  if (config.stall_seconds < 0 || (dist.enabled && !dist.job.is_trainer())) return nullptr;
  health::WatchdogOptions options;
  options.who = dist.who();
  options.stall_seconds = config.stall_seconds;
  options.startup_seconds = config.stall_startup_seconds;
  if (!storage::is_s3_uri(config.model_dir)) {
    options.report_dir = (std::filesystem::path(config.model_dir) / "stall-reports").string();
  }
  options.on_stall = [path = config.termination_log](const std::string& summary) {
    write_termination_error(path, summary);
  };
  options.standing_down = [] { return stop_requested(); };
  return std::make_unique<health::StallWatchdog>(std::move(options));
}

}  // namespace cifar::train
