// The cores a process may use, from the cgroup files a container sees (cpu_cores.h).
#include "train/cpu_cores.h"

#include <gtest/gtest.h>

#include <thread>

namespace cifar::train::cpu_cores_test {

TEST(CpuCores, ACgroupV2LimitIsItsCoresRoundedUp) {
  EXPECT_EQ(cores_of_cpu_max("100000 100000\n"), 1);
  EXPECT_EQ(cores_of_cpu_max("150000 100000\n"), 2);  // 1.5 cores: a second thread has work
  EXPECT_EQ(cores_of_cpu_max("50000 100000"), 1);
  EXPECT_EQ(cores_of_cpu_max("400000 100000\n"), 4);
}

TEST(CpuCores, NoLimitOrTextThatIsNoneIsNoLimit) {
  EXPECT_EQ(cores_of_cpu_max("max 100000\n"), std::nullopt);
  EXPECT_EQ(cores_of_cpu_max(""), std::nullopt);  // no such file: not in a cgroup v2
  EXPECT_EQ(cores_of_cpu_max("100000"), std::nullopt);
  EXPECT_EQ(cores_of_cpu_max("100000 0\n"), std::nullopt);
  EXPECT_EQ(cores_of_cfs_quota("-1\n", "100000\n"), std::nullopt);  // cgroup v1: none
  EXPECT_EQ(cores_of_cfs_quota("", ""), std::nullopt);
}

TEST(CpuCores, ACgroupV1QuotaIsItsCoresRoundedUp) {
  EXPECT_EQ(cores_of_cfs_quota("200000\n", "100000\n"), 2);
  EXPECT_EQ(cores_of_cfs_quota("25000\n", "100000\n"), 1);
}

TEST(CpuCores, ThisProcessMayUseAtLeastOneCoreAndNoMoreThanTheMachineHas) {
  const auto usable = usable_cores();
  EXPECT_GE(usable.cores, 1);
  EXPECT_LE(usable.cores, static_cast<int>(std::max(1U, std::thread::hardware_concurrency())));
  if (usable.cpu_limit) {
    EXPECT_LE(usable.cores, *usable.cpu_limit);
  }
}

}  // namespace cifar::train::cpu_cores_test
