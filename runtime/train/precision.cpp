#include "train/precision.h"

#include <ATen/autocast_mode.h>

#include <stdexcept>
#include <string>

#ifdef CIFAR_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

namespace cifar::train {
namespace {

// bf16 tensor cores came with Ampere (compute capability 8.0).
bool gpu_has_bf16(const torch::Device& device) {
#ifdef CIFAR_WITH_CUDA
  const auto index = device.has_index() ? device.index() : at::cuda::current_device();
  return at::cuda::getDeviceProperties(index)->major >= 8;
#else
  (void)device;
  return false;  // a CPU-only build: resolve_device refuses cuda before this is asked
#endif
}

}  // namespace

Precision resolve_precision(Precision requested, const torch::Device& device) {
  const bool cuda = device.is_cuda();
  switch (requested) {
    case Precision::kAuto:
      return cuda && gpu_has_bf16(device) ? Precision::kBf16 : Precision::kFp32;
    case Precision::kFp32:
      return Precision::kFp32;
    case Precision::kBf16:
      if (cuda && !gpu_has_bf16(device)) {
        throw std::invalid_argument(
            "--precision bf16: this GPU has no bf16 (it needs compute capability 8.0 or newer); "
            "use fp32");
      }
      return Precision::kBf16;
    case Precision::kFp16:
      if (!cuda) {
        throw std::invalid_argument(
            "--precision fp16 is for CUDA devices: on the CPU, autocast computes in bf16 "
            "(--precision bf16)");
      }
      // fp16 gradients underflow without a loss scaler, and cifar-train has none yet.
      throw std::invalid_argument(
          "--precision fp16 needs loss scaling, which cifar-train does not do yet: use bf16 "
          "(the default on GPUs that have it) or fp32");
  }
  throw std::invalid_argument("unknown precision");
}

AutocastScope::AutocastScope(Precision precision, const torch::Device& device)
    : cuda_(device.is_cuda()) {
  if (precision == Precision::kFp32 || precision == Precision::kAuto) return;
  const auto type = precision == Precision::kBf16 ? at::kBFloat16 : at::kHalf;
  if (cuda_) {
    was_enabled_ = at::autocast::is_enabled();
    previous_type_ = at::autocast::get_autocast_gpu_dtype();
    at::autocast::set_autocast_gpu_dtype(type);
    at::autocast::set_enabled(true);
  } else {
    was_enabled_ = at::autocast::is_cpu_enabled();
    previous_type_ = at::autocast::get_autocast_cpu_dtype();
    at::autocast::set_autocast_cpu_dtype(type);
    at::autocast::set_cpu_enabled(true);
  }
  at::autocast::increment_nesting();
  active_ = true;
}

AutocastScope::~AutocastScope() {
  if (!active_) return;
  // The outermost scope drops the weights' cached low-precision copies: they go stale at the
  // next optimizer step.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  if (cuda_) {
    at::autocast::set_enabled(was_enabled_);
    at::autocast::set_autocast_gpu_dtype(previous_type_);
  } else {
    at::autocast::set_cpu_enabled(was_enabled_);
    at::autocast::set_autocast_cpu_dtype(previous_type_);
  }
}

}  // namespace cifar::train
