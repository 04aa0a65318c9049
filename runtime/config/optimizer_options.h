// The optimizer a run trains with (--optimizer and its settings): train/optimizer.h builds it in a
// trainer, distributed/ps/shard_optimizer.h applies the same rules on a PS shard.
#pragma once

#include "contract/enum_names.h"

namespace cifar::train {

enum class OptimizerKind { kSgd, kAdam };
inline constexpr contract::EnumNames<OptimizerKind, 2> kOptimizerNames{{
    {"sgd", OptimizerKind::kSgd},
    {"adam", OptimizerKind::kAdam},
}};

struct OptimizerOptions {
  OptimizerKind kind = OptimizerKind::kSgd;
  double momentum = 0.9;
  bool nesterov = true;
  double weight_decay = 5e-4;
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.999;
};

}  // namespace cifar::train
