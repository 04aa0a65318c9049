#include "framework/expectations.h"

#include <gtest/gtest.h>

namespace expectations_test {
namespace {

using cifar::op::Expectations;
using cifar::op::Steady;
using nlohmann::json;
using namespace std::chrono_literals;

json pod(const std::string& name, const std::string& uid, bool terminating = false) {
  json p = {{"metadata", {{"name", name}, {"uid", uid}}}};
  if (terminating) p["metadata"]["deletionTimestamp"] = "2026-11-22T10:00:00Z";
  return p;
}

TEST(Expectations, NothingExpectedIsNothingPending) {
  Expectations e;
  EXPECT_FALSE(e.pending("ns/j", {}));
}

TEST(Expectations, CreatedPodsArePendingUntilTheCacheShowsThemAll) {
  Expectations e;
  e.expect_created("ns/j", "j-ps-0");
  e.expect_created("ns/j", "j-master-0");
  const auto now = Steady::now();
  EXPECT_TRUE(e.pending("ns/j", {}, now));
  EXPECT_TRUE(e.pending("ns/j", {pod("j-ps-0", "1")}, now));
  EXPECT_FALSE(e.pending("ns/j", {pod("j-master-0", "2")}, now));  // the PS was seen before
  EXPECT_FALSE(e.pending("ns/other", {}, now));
}

TEST(Expectations, ADeletedPodIsPendingWhileTheCacheShowsItAlive) {
  Expectations e;
  e.expect_deleted("ns/j", "uid-1");
  const auto now = Steady::now();
  EXPECT_TRUE(e.pending("ns/j", {pod("j-worker-0", "uid-1")}, now));
  EXPECT_FALSE(e.pending("ns/j", {pod("j-worker-0", "uid-1", true)}, now));  // terminating
  e.expect_deleted("ns/j", "uid-2");
  EXPECT_FALSE(e.pending("ns/j", {pod("j-worker-0", "uid-3")}, now));  // recreated: a new uid
}

TEST(Expectations, ExpireSoALostEventNeverStallsAJob) {
  Expectations e(10s);
  e.expect_created("ns/j", "j-ps-0");
  const auto now = Steady::now();
  const auto left = e.pending("ns/j", {}, now + 4s);
  ASSERT_TRUE(left);
  EXPECT_LE(*left, 6s);
  EXPECT_GT(*left, 5s);
  EXPECT_FALSE(e.pending("ns/j", {}, now + 11s));
  EXPECT_FALSE(e.pending("ns/j", {}, now + 11s));  // and forgotten
}

TEST(Expectations, ForgetDropsAJobsExpectations) {
  Expectations e;
  e.expect_created("ns/j", "j-ps-0");
  e.forget("ns/j");
  EXPECT_FALSE(e.pending("ns/j", {}));
}

}  // namespace
}  // namespace expectations_test
