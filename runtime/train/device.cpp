#include "train/device.h"

#include <spdlog/spdlog.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdlib>
#include <stdexcept>

#include "train/cpu_cores.h"

namespace cifar::train {
namespace {

// Why -c cuda cannot be had here, and what to do instead.
std::string no_cuda_message() {
  std::string message = "-c cuda: no CUDA device is available to this process";
#ifndef CIFAR_WITH_CUDA
  message += " (this cifar-train is built without CUDA: the runtime image; runtime-gpu has it)";
#endif
  if (const char* visible = std::getenv("NVIDIA_VISIBLE_DEVICES")) {
    // Allocated to the pod by a device plugin, yet not to be had.
    message += std::string("; the GPUs allocated to it (NVIDIA_VISIBLE_DEVICES) are ") + visible;
  }
  return message + ". To train on the CPU: -c cpu (a CifarTrainJob: training.device: cpu)";
}

}  // namespace

torch::Device resolve_device(const std::string& name) {
  if (name == "cpu") return torch::kCPU;
  if (name == "cuda" || name.rfind("cuda:", 0) == 0) {
    if (!torch::cuda::is_available()) throw std::invalid_argument(no_cuda_message());
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
  if (requested > 0) {
    torch::set_num_threads(requested);
    return requested;
  }
  const auto usable = usable_cores();
  if (usable.cpu_limit) {
    spdlog::info("{} intra-op thread(s): the CPU limit of this process's cgroup is {} core(s)",
                 usable.cores, *usable.cpu_limit);
  }
  torch::set_num_threads(usable.cores);
  return usable.cores;
}

}  // namespace cifar::train
