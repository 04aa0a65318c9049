#include "train/monitor.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/support/process.h"

namespace cifar::train {
namespace {

std::vector<nlohmann::json> read_records(const std::filesystem::path& dir) {
  std::vector<nlohmann::json> records;
  std::ifstream in(dir / MonitorLog::kFileName);
  for (std::string line; std::getline(in, line);) records.push_back(nlohmann::json::parse(line));
  return records;
}

TEST(MonitorLog, AppendsOneJsonObjectPerEpoch) {
  testing::TempDir dir;
  {
    MonitorLog log(dir.path());
    for (int64_t e = 1; e <= 3; ++e) {
      EpochRecord r;
      r.epoch = e;
      r.test_accuracy = 0.1 * static_cast<double>(e);
      r.images_per_second = 1000;
      log.append(r);
    }
    log.wait_until_saved();  // written in the background
  }
  const auto records = read_records(dir.path());
  ASSERT_EQ(records.size(), 3U);
  for (const char* key : {"epoch", "step", "train_loss", "train_accuracy", "test_accuracy",
                          "images_per_second", "seconds", "learning_rate"}) {
    EXPECT_TRUE(records[0].contains(key)) << key;
  }
  EXPECT_EQ(records[2]["epoch"], 3);
  EXPECT_DOUBLE_EQ(records[1]["test_accuracy"].get<double>(), 0.2);
}

TEST(MonitorLog, TruncateAfterDropsLaterEpochsAndTornLines) {
  testing::TempDir dir;
  {
    MonitorLog log(dir.path());
    for (int64_t e = 1; e <= 4; ++e) {
      EpochRecord r;
      r.epoch = e;
      log.append(r);
    }
    log.wait_until_saved();
  }
  {
    std::ofstream torn(dir.path() / MonitorLog::kFileName, std::ios::app);
    torn << R"({"epoch": 5, "train_lo)";  // a write cut short by kill -9
  }
  {
    MonitorLog log(dir.path());
    log.truncate_after(2);
    log.wait_until_saved();
  }
  const auto records = read_records(dir.path());
  ASSERT_EQ(records.size(), 2U);
  EXPECT_EQ(records[1]["epoch"], 2);
}

}  // namespace
}  // namespace cifar::train
