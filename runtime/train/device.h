// The device and the CPU threads a process trains or evaluates with.
#pragma once

#include <torch/types.h>

#include <string>

namespace cifar::train {

// "cpu", "cuda" or "cuda:N" (a data-parallel rank's own GPU); throws std::invalid_argument.
torch::Device resolve_device(const std::string& name);
// Sets LibTorch's intra-op threads to `requested` (--threads; 0: the cores this process may use,
// cpu_cores.h), since it defaults to one on some machines; returns the count.
int configure_threads(int requested);

}  // namespace cifar::train
