// The precision a run computes its forward pass in (--precision; train/precision.h resolves it and
// runs autocast).
#pragma once

#include "contract/enum_names.h"

namespace cifar::train {

// The floating-point type of the forward pass (weights, gradients and optimizer state stay fp32).
enum class Precision { kAuto, kFp32, kBf16, kFp16 };
inline constexpr contract::EnumNames<Precision, 4> kPrecisionNames{{
    {"auto", Precision::kAuto},  // bf16 on a GPU that has it, fp32 elsewhere
    {"fp32", Precision::kFp32},
    {"bf16", Precision::kBf16},
    {"fp16", Precision::kFp16},
}};

}  // namespace cifar::train
