// Test support: cifar-train command lines built from the flag groups the tests' runs share.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace cifar::testing {

// cifar-train takes a repeated flag's last value, so flags added later override earlier ones.
class TrainArgs {
 public:
  TrainArgs() = default;
  // Starts with `prefix`: the binary (CIFAR_TRAIN_BIN), or a launcher and its own arguments.
  explicit TrainArgs(std::vector<std::string> prefix);

  // -m `model` on synthetic data: `train_images` training and `test_images` test images.
  TrainArgs& synthetic(const std::string& model, int train_images, int test_images);
  // The model directory `work`/`model_dir` and the data directory `work`/data.
  TrainArgs& dirs(const std::filesystem::path& work, const std::string& model_dir);
  // One compute thread and one loader worker: tests run side by side on few cores.
  TrainArgs& single_threaded();
  // No metrics endpoint, so that runs need no free port.
  TrainArgs& no_metrics_server();
  TrainArgs& add(const std::vector<std::string>& flags);

  [[nodiscard]] std::vector<std::string> args() const { return args_; }

 private:
  std::vector<std::string> args_;
};

}  // namespace cifar::testing
