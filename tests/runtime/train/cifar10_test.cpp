// Real CIFAR-10: the reader and the --train-limit / --test-limit cuts on a slice of the real files
// (2,000 training and 500 test images, scripts/cifar10-data.sh --slice, ctest fixture
// cifar10_slice), and a short run of the real cifar-train binary on it that must beat chance.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "config/train_config.h"
#include "data/dataset.h"
#include "tests/support/process.h"
#include "train/datasets.h"

namespace cifar::train {
namespace {
namespace fs = std::filesystem;
using cifar::testing::run_process;
using cifar::testing::TempDir;

constexpr int64_t kRecordsPerBatch = 400;  // the fixture's slice: 5 x 400 train, 500 test
constexpr int64_t kTestRecords = 500;
constexpr int64_t kRecordBytes = 1 + 3 * 32 * 32;

fs::path slice_dir() {
  const char* dir = std::getenv("CIFAR10_SLICE");
  if (dir == nullptr) throw std::runtime_error("CIFAR10_SLICE is not set (ctest sets it)");
  return dir;
}

std::vector<uint8_t> file_bytes(const fs::path& file, int64_t offset, int64_t count) {
  std::ifstream in(file, std::ios::binary);
  in.seekg(offset);
  std::vector<uint8_t> bytes(static_cast<size_t>(count));
  in.read(reinterpret_cast<char*>(bytes.data()), count);
  if (in.gcount() != count) throw std::runtime_error("short read of " + file.string());
  return bytes;
}

// The label byte and pixels of image `i` of `set`, laid out as a record of the binary files.
std::vector<uint8_t> record_of(const data::Dataset& set, int64_t i) {
  std::vector<uint8_t> record(static_cast<size_t>(1 + set.image_bytes()));
  record[0] = static_cast<uint8_t>(set.labels.at(static_cast<size_t>(i)));
  std::copy_n(set.image(i), set.image_bytes(), record.begin() + 1);
  return record;
}

TEST(Cifar10, ReaderReadsTheRealFilesInBatchOrder) {
  const fs::path dir = slice_dir();
  const data::TrainTest sets = data::read_cifar10(dir);
  ASSERT_EQ(sets.train.size(), 5 * kRecordsPerBatch);
  ASSERT_EQ(sets.test.size(), kTestRecords);
  EXPECT_EQ(sets.train.num_classes, 10);
  EXPECT_EQ(sets.train.channels, 3);
  EXPECT_EQ(sets.train.height, 32);

  // Batch i's first record comes right after batch i-1's last, byte for byte.
  for (int batch = 1; batch <= 5; ++batch) {
    const auto file = dir / ("data_batch_" + std::to_string(batch) + ".bin");
    const int64_t first = (batch - 1) * kRecordsPerBatch;
    EXPECT_EQ(record_of(sets.train, first), file_bytes(file, 0, kRecordBytes)) << file;
    EXPECT_EQ(record_of(sets.train, first + kRecordsPerBatch - 1),
              file_bytes(file, (kRecordsPerBatch - 1) * kRecordBytes, kRecordBytes))
        << file;
  }
  EXPECT_EQ(record_of(sets.test, kTestRecords - 1),
            file_bytes(dir / "test_batch.bin", (kTestRecords - 1) * kRecordBytes, kRecordBytes));
}

TEST(Cifar10, TheSliceHasCifar10sClassesAndColourStatistics) {
  const data::TrainTest sets = data::read_cifar10(slice_dir());
  // The five batches are shuffled: each class is ~10% of any slice (binomial sd ~13 of 2,000).
  std::array<int, 10> per_class{};
  for (const int label : sets.train.labels) ++per_class.at(static_cast<size_t>(label));
  for (size_t c = 0; c < per_class.size(); ++c) {
    EXPECT_GT(per_class[c], 140) << "class " << c;
    EXPECT_LT(per_class[c], 260) << "class " << c;
  }
  // CIFAR-10's channel means are 0.491, 0.482, 0.447 (red, green, blue): red above blue also
  // shows the planes are read in the files' R, G, B order.
  const auto stats = data::channel_stats(sets.train);
  const std::array<float, 3> cifar10_mean{0.491F, 0.482F, 0.447F};
  for (size_t ch = 0; ch < 3; ++ch) {
    EXPECT_NEAR(stats.mean.at(ch), cifar10_mean.at(ch), 0.03) << "channel " << ch;
    EXPECT_NEAR(stats.stddev.at(ch), 0.25, 0.03) << "channel " << ch;
  }
  EXPECT_GT(stats.mean[0], stats.mean[2] + 0.02);
}

TEST(Cifar10, TrainAndTestLimitsKeepTheFirstImages) {
  const data::TrainTest whole = data::read_cifar10(slice_dir());
  TrainConfig config;
  config.dataset = "cifar10";
  config.data_dir = slice_dir().string();
  config.train_limit = 300;
  config.test_limit = 120;
  const data::TrainTest cut = load_datasets(config);
  ASSERT_EQ(cut.train.size(), 300);
  ASSERT_EQ(cut.test.size(), 120);
  EXPECT_EQ(record_of(cut.train, 299), record_of(whole.train, 299));
  EXPECT_EQ(record_of(cut.test, 119), record_of(whole.test, 119));

  config.train_limit = config.test_limit = 0;  // 0: all of them
  const data::TrainTest all = load_datasets(config);
  EXPECT_EQ(all.train.size(), whole.train.size());
  EXPECT_EQ(all.test.size(), whole.test.size());
}

// ResNet-20, 2,000 images, 4 epochs (~15 s on 2 cores): chance is 10%; such runs reach 35-45%.
TEST(Cifar10, AShortResNet20RunBeatsChanceByAWideMargin) {
  TempDir work;
  const auto result = run_process({CIFAR_TRAIN_BIN,
                                   "-m",
                                   "resnet20",
                                   "-d",
                                   "cifar10",
                                   "--data-dir",
                                   slice_dir().string(),
                                   "-md",
                                   (work.path() / "run").string(),
                                   "-e",
                                   "4",
                                   "-b",
                                   "64",
                                   "--lr",
                                   "0.05",  // 0.2 ends at 29.8% on 2,000 images, 0.05 at 37.8%
                                   "--schedule",
                                   "onecycle",
                                   "--label-smoothing",
                                   "0.1",
                                   "--threads",
                                   "2",
                                   "--workers",
                                   "1",
                                   "--progress",
                                   "lines",
                                   "--metrics-port",
                                   "-1"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("cifar10: 2000 training and 500 test images"), std::string::npos)
      << result.output;
  std::ifstream monitor(work.path() / "run" / "monitor.jsonl");
  std::vector<nlohmann::json> epochs;
  for (std::string line; std::getline(monitor, line);)
    epochs.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(epochs.size(), 4U) << result.output;
  EXPECT_GE(epochs.back()["test_accuracy"].get<double>(), 0.30) << result.output;
  EXPECT_LT(epochs.back()["train_loss"].get<double>(), epochs.front()["train_loss"].get<double>());
}

}  // namespace
}  // namespace cifar::train
