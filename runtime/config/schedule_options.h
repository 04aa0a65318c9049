// The learning-rate schedule a run follows (--schedule, --lr and their settings;
// train/lr_schedule.h computes it).
#pragma once

#include "contract/enum_names.h"

namespace cifar::train {

enum class ScheduleKind { kConstant, kStep, kCosine, kOneCycle };
inline constexpr contract::EnumNames<ScheduleKind, 4> kScheduleNames{{
    {"constant", ScheduleKind::kConstant},
    {"step", ScheduleKind::kStep},
    {"cosine", ScheduleKind::kCosine},
    {"onecycle", ScheduleKind::kOneCycle},
}};

struct ScheduleOptions {
  ScheduleKind kind = ScheduleKind::kCosine;
  double base_lr = 0.05;
  double warmup_epochs = 0;  // linear ramp from 0 (all kinds but one-cycle, which has its own)
  double step_epochs = 30;   // kStep: multiply by `gamma` every `step_epochs`
  double gamma = 0.1;
  double final_lr_fraction = 0;  // kCosine / kOneCycle: lr at the end as a fraction of base_lr
  double one_cycle_peak_fraction = 0.25;  // kOneCycle: where the peak sits in the run
};

}  // namespace cifar::train
