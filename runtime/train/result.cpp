#include "train/result.h"

#include <spdlog/fmt/fmt.h>

namespace cifar::train {

void ThroughputMeter::add_step(int64_t images, double seconds) {
  images_ += images;
  if (++steps_ > TrainResult::kWarmupSteps) {
    steady_images_ += images;
    steady_seconds_ += seconds;
  }
}

void ThroughputMeter::report(TrainResult& result) const {
  const double total = result.time.total();
  result.images_per_second = total > 0 ? static_cast<double>(images_) / total : 0;
  result.steady_images_per_second =
      steady_seconds_ > 0 ? static_cast<double>(steady_images_) / steady_seconds_ : 0;
}

std::vector<std::string> describe(const TrainResult& result) {
  std::vector<std::string> lines;
  // bench/ reads "done:"; a stopped run is not done.
  lines.push_back(fmt::format("{}: {} epochs, {} steps, {:.1f} img/s ({:.1f} img/s after warm-up)",
                              result.stopped ? "stopped on request" : "done",
                              result.epochs_completed, result.steps, result.images_per_second,
                              result.steady_images_per_second));
  if (result.evaluated && !result.stopped) {
    lines.push_back(fmt::format("test accuracy {:.2f}% (best {:.2f}%)",
                                100 * result.last_epoch.test_accuracy,
                                100 * result.best_test_accuracy));
  }
  const auto& t = result.time;
  const double total = t.total() > 0 ? t.total() : 1;
  lines.push_back(fmt::format(
      "step time: data wait {:.1f}%, forward {:.1f}%, backward {:.1f}%, communication {:.1f}%, "
      "optimizer {:.1f}%, other {:.1f}%",
      100 * t.data_wait / total, 100 * t.forward / total, 100 * t.backward / total,
      100 * t.communication / total, 100 * t.optimizer / total, 100 * t.other / total));
  return lines;
}

}  // namespace cifar::train
