#include "train/device.h"

#include <spdlog/spdlog.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <algorithm>
#include <stdexcept>

#include "train/cpu_cores.h"

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
