// The operator's clock convention (framework/clock.h): times as the API stores them.
#include "framework/clock.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace cifar::op::clock_test {
namespace {

using std::chrono::seconds;

const Clock::time_point kT0 = parse_time("2026-11-22T12:00:00Z");

TEST(Clock, TimesAreRfc3339Utc) {
  EXPECT_EQ(format_time(kT0 + seconds(3661)), "2026-11-22T13:01:01Z");
  EXPECT_EQ(parse_time(format_time(kT0)), kT0);
  EXPECT_THROW(parse_time("yesterday"), std::invalid_argument);
}

TEST(Clock, ATimeKeepsWholeSeconds) {
  const auto t = kT0 + std::chrono::milliseconds(999);
  EXPECT_EQ(to_time(t), kT0);
  EXPECT_EQ(format_time(t), "2026-11-22T12:00:00Z");
}

TEST(Clock, MicroTimeIsUtcWithSixFractionalDigits) {
  const auto t = Clock::from_time_t(1795348800) + std::chrono::microseconds(42);
  EXPECT_EQ(format_micro_time(t), "2026-11-22T12:00:00.000042Z");
}

}  // namespace
}  // namespace cifar::op::clock_test
