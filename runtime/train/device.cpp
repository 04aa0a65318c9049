#include "train/device.h"

#include <torch/cuda.h>
#include <torch/torch.h>

#include <algorithm>
#include <stdexcept>
#include <thread>

namespace cifar::train {

torch::Device resolve_device(const std::string& name) {
  if (name == "cpu") return torch::kCPU;
  if (name == "cuda" || name.rfind("cuda:", 0) == 0) {
    if (!torch::cuda::is_available()) {
      throw std::invalid_argument("-c cuda: no CUDA device is available to this build");
    }
    const torch::Device device(name);  // "cuda:N": a data-parallel rank's own GPU
    const auto count = static_cast<int64_t>(torch::cuda::device_count());
    if (device.has_index() && device.index() >= count) {
      throw std::invalid_argument("device " + name + ": this machine has " + std::to_string(count) +
                                  " CUDA device(s)");
    }
    return device;
  }
  throw std::invalid_argument("unknown device '" + name + "' (cpu, cuda)");
}

int configure_threads(int requested) {
  const int threads =
      requested > 0 ? requested : static_cast<int>(std::thread::hardware_concurrency());
  torch::set_num_threads(std::max(threads, 1));
  return std::max(threads, 1);
}

}  // namespace cifar::train
