#include "train/lr_schedule.h"

#include <gtest/gtest.h>

namespace cifar::train {
namespace {

ScheduleOptions options(ScheduleKind kind) {
  ScheduleOptions o;
  o.kind = kind;
  o.base_lr = 0.1;
  return o;
}

TEST(LrSchedule, ConstantStaysAtBase) {
  const auto o = options(ScheduleKind::kConstant);
  for (int64_t s : {0, 10, 999}) EXPECT_DOUBLE_EQ(learning_rate(o, s, 100, 1000), 0.1);
}

TEST(LrSchedule, WarmupRampsLinearlyThenHandsOver) {
  auto o = options(ScheduleKind::kConstant);
  o.warmup_epochs = 2;  // 200 steps
  EXPECT_DOUBLE_EQ(learning_rate(o, 0, 100, 1000), 0.1 * 1 / 200);
  EXPECT_DOUBLE_EQ(learning_rate(o, 99, 100, 1000), 0.1 * 100 / 200);
  EXPECT_DOUBLE_EQ(learning_rate(o, 199, 100, 1000), 0.1);
  EXPECT_DOUBLE_EQ(learning_rate(o, 200, 100, 1000), 0.1);
}

TEST(LrSchedule, StepDecaysEveryStepEpochs) {
  auto o = options(ScheduleKind::kStep);
  o.step_epochs = 3;
  o.gamma = 0.5;
  EXPECT_DOUBLE_EQ(learning_rate(o, 299, 100, 1000), 0.1);
  EXPECT_DOUBLE_EQ(learning_rate(o, 300, 100, 1000), 0.05);
  EXPECT_DOUBLE_EQ(learning_rate(o, 600, 100, 1000), 0.025);
}

TEST(LrSchedule, CosineGoesFromBaseToFinalMonotonically) {
  auto o = options(ScheduleKind::kCosine);
  o.final_lr_fraction = 0.1;
  EXPECT_DOUBLE_EQ(learning_rate(o, 0, 100, 1000), 0.1);
  EXPECT_NEAR(learning_rate(o, 500, 100, 1000), 0.1 * (0.1 + 0.9 * 0.5), 1e-12);
  EXPECT_NEAR(learning_rate(o, 1000, 100, 1000), 0.01, 1e-12);
  double previous = 1;
  for (int64_t s = 0; s <= 1000; s += 50) {
    const double lr = learning_rate(o, s, 100, 1000);
    EXPECT_LE(lr, previous);
    previous = lr;
  }
}

TEST(LrSchedule, OneCycleRisesToPeakThenFalls) {
  auto o = options(ScheduleKind::kOneCycle);
  o.one_cycle_peak_fraction = 0.25;
  EXPECT_NEAR(learning_rate(o, 0, 100, 1000), 0.1 / 250, 1e-12);
  EXPECT_NEAR(learning_rate(o, 249, 100, 1000), 0.1, 1e-12);
  EXPECT_NEAR(learning_rate(o, 250, 100, 1000), 0.1, 1e-12);
  EXPECT_LT(learning_rate(o, 600, 100, 1000), learning_rate(o, 400, 100, 1000));
  EXPECT_NEAR(learning_rate(o, 1000, 100, 1000), 0.0, 1e-12);
}

}  // namespace
}  // namespace cifar::train
