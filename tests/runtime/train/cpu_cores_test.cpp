// The cores a process may use, from the cgroup files a container sees (cpu_cores.h).
#include "train/cpu_cores.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/support/process.h"

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

// usable_cores() reads the files a container sees under its cgroup root, here a directory made to
// look like one. Every limit below is under any machine's core count, so the answer is the limit.
class CgroupFiles : public ::testing::Test {
 protected:
  void write(const std::filesystem::path& name, const std::string& text) {
    std::filesystem::create_directories((root_.path() / name).parent_path());
    std::ofstream(root_.path() / name) << text;
  }
  [[nodiscard]] UsableCores read() const { return usable_cores(root_.path()); }

  testing::TempDir root_;
};

TEST_F(CgroupFiles, AV2LimitOfOneCoreIsOneCore) {
  write("cpu.max", "100000 100000\n");
  EXPECT_EQ(read().cpu_limit, 1);
  EXPECT_EQ(read().cores, 1);
}

TEST_F(CgroupFiles, AV2LimitOfOneAndAHalfCoresIsTwo) {
  write("cpu.max", "150000 100000\n");
  EXPECT_EQ(read().cpu_limit, 2);
  EXPECT_EQ(read().cores, std::min(2, usable_cores("/nonexistent").cores));
}

TEST_F(CgroupFiles, AV2MaxIsNoLimit) {
  write("cpu.max", "max 100000\n");
  EXPECT_EQ(read().cpu_limit, std::nullopt);
  EXPECT_EQ(read().cores, usable_cores("/nonexistent").cores);
}

TEST_F(CgroupFiles, AV1QuotaIsReadWhereThereIsNoV2File) {
  write("cpu/cpu.cfs_quota_us", "100000\n");
  write("cpu/cpu.cfs_period_us", "100000\n");
  EXPECT_EQ(read().cpu_limit, 1);
  EXPECT_EQ(read().cores, 1);
}

TEST_F(CgroupFiles, AV1QuotaOfMinusOneIsNoLimit) {
  write("cpu/cpu.cfs_quota_us", "-1\n");
  write("cpu/cpu.cfs_period_us", "100000\n");
  EXPECT_EQ(read().cpu_limit, std::nullopt);
}

TEST_F(CgroupFiles, NoCgroupFilesIsNoLimitAndAtLeastOneCore) {
  EXPECT_EQ(read().cpu_limit, std::nullopt);
  EXPECT_GE(read().cores, 1);
}

}  // namespace cifar::train::cpu_cores_test
