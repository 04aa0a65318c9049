// The precision a run computes its forward pass in (--precision), and autocast, which does it.
#pragma once

#include <ATen/core/ScalarType.h>
#include <torch/types.h>

#include "config/precision.h"

namespace cifar::train {

// What `requested` means on `device`: auto is bf16 on a CUDA GPU with bf16 (compute capability
// 8.0 and up) and fp32 elsewhere. Throws std::invalid_argument, naming what to use instead, where
// the device cannot train in the precision asked for.
Precision resolve_precision(Precision requested, const torch::Device& device);

// Autocast for as long as it lives: ops that gain from a narrower type (convolutions, matrix
// products) run in `precision`, the numerically touchy ones stay fp32; the weights, their
// gradients and the optimizer's state are fp32 throughout. Nothing at all for fp32. Autocast is
// per thread, so a scope covers the forward pass of the thread that made it.
class AutocastScope {
 public:
  AutocastScope(Precision precision, const torch::Device& device);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;
  AutocastScope(AutocastScope&&) = delete;
  AutocastScope& operator=(AutocastScope&&) = delete;

 private:
  bool active_ = false;
  bool cuda_ = false;
  bool was_enabled_ = false;  // the state before, restored at the end (scopes may nest)
  at::ScalarType previous_type_ = at::kFloat;
};

}  // namespace cifar::train
