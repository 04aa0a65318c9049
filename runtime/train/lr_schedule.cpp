#include "train/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace cifar::train {
namespace {

constexpr double kPi = 3.14159265358979323846;

// Cosine interpolation from `from` (progress 0) to `to` (progress 1).
double cosine(double from, double to, double progress) {
  return to + (from - to) * 0.5 * (1 + std::cos(kPi * std::clamp(progress, 0.0, 1.0)));
}

}  // namespace

double learning_rate(const ScheduleOptions& o, int64_t step, int64_t steps_per_epoch,
                     int64_t total_steps) {
  const auto s = static_cast<double>(step);
  const double total = static_cast<double>(std::max<int64_t>(total_steps, 1));
  const double per_epoch = static_cast<double>(std::max<int64_t>(steps_per_epoch, 1));
  const double final_lr = o.base_lr * o.final_lr_fraction;

  if (o.kind == ScheduleKind::kOneCycle) {
    // Linear up from ~0 to the peak, then cosine down to the final rate (Smith's one-cycle).
    const double peak_step = std::max(1.0, o.one_cycle_peak_fraction * total);
    if (s < peak_step) return o.base_lr * (s + 1) / peak_step;
    return cosine(o.base_lr, final_lr, (s - peak_step) / std::max(1.0, total - peak_step));
  }

  const double warmup = o.warmup_epochs * per_epoch;
  if (s < warmup) return o.base_lr * (s + 1) / warmup;

  switch (o.kind) {
    case ScheduleKind::kConstant:
      return o.base_lr;
    case ScheduleKind::kStep: {
      const auto drops = std::floor(s / std::max(1.0, o.step_epochs * per_epoch));
      return o.base_lr * std::pow(o.gamma, drops);
    }
    case ScheduleKind::kCosine:
      return cosine(o.base_lr, final_lr, (s - warmup) / std::max(1.0, total - warmup));
    case ScheduleKind::kOneCycle:
      break;  // handled above
  }
  return o.base_lr;
}

}  // namespace cifar::train
