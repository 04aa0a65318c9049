#include "tests/support/train_args.h"

#include <utility>

namespace cifar::testing {

TrainArgs::TrainArgs(std::vector<std::string> prefix) : args_(std::move(prefix)) {}

TrainArgs& TrainArgs::synthetic(const std::string& model, int train_images, int test_images) {
  return add({"-m", model, "-d", "synthetic", "--synthetic-train-size",
              std::to_string(train_images), "--synthetic-test-size", std::to_string(test_images)});
}

TrainArgs& TrainArgs::dirs(const std::filesystem::path& work, const std::string& model_dir) {
  return add({"-md", (work / model_dir).string(), "--data-dir", (work / "data").string()});
}

TrainArgs& TrainArgs::single_threaded() { return add({"--threads", "1", "--workers", "1"}); }

TrainArgs& TrainArgs::no_metrics_server() { return add({"--metrics-port", "-1"}); }

TrainArgs& TrainArgs::add(const std::vector<std::string>& flags) {
  args_.insert(args_.end(), flags.begin(), flags.end());
  return *this;
}

}  // namespace cifar::testing
