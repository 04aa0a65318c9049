// Synthetic CIFAR-10-format data: real files, deterministic, learnable but noisy.
#include <gtest/gtest.h>

#include <array>
#include <string>

#include "data/dataset.h"
#include "tests/runtime/data/test_util.h"

namespace cifar::data {
namespace {

namespace fs = std::filesystem;
using testing::read_bytes;
using testing::TempDir;

SyntheticOptions options(int64_t train, int64_t test, int64_t classes = 10, uint64_t seed = 1) {
  SyntheticOptions o;
  o.train_size = train;
  o.test_size = test;
  o.num_classes = classes;
  o.seed = seed;
  return o;
}

const std::array<std::string, 6> kFiles = {"data_batch_1.bin", "data_batch_2.bin",
                                           "data_batch_3.bin", "data_batch_4.bin",
                                           "data_batch_5.bin", "test_batch.bin"};

TEST(Synthetic, WritesRealCifar10FilesThatReadBack) {
  TempDir tmp;
  write_synthetic_cifar10(tmp / "syn", options(103, 17, 4));
  for (const auto& f : kFiles) ASSERT_TRUE(fs::exists(tmp / "syn" / f)) << f;
  EXPECT_EQ(fs::file_size(tmp / "syn" / "data_batch_1.bin"), 20U * 3073);
  EXPECT_EQ(fs::file_size(tmp / "syn" / "data_batch_5.bin"), 21U * 3073);
  const TrainTest tt = read_cifar10(tmp / "syn");
  EXPECT_EQ(tt.train.size(), 103);
  EXPECT_EQ(tt.test.size(), 17);
  for (int32_t l : tt.train.labels) {
    EXPECT_GE(l, 0);
    EXPECT_LT(l, 4);
  }
}

TEST(Synthetic, DeterministicInSeed) {
  TempDir tmp;
  const SyntheticOptions a = options(50, 10, 10, 7);
  SyntheticOptions b = a;
  b.seed = 8;
  write_synthetic_cifar10(tmp / "a1", a);
  write_synthetic_cifar10(tmp / "a2", a);
  write_synthetic_cifar10(tmp / "b", b);
  for (const auto& f : kFiles) {
    EXPECT_EQ(read_bytes(tmp / "a1" / f), read_bytes(tmp / "a2" / f)) << f;
    EXPECT_NE(read_bytes(tmp / "a1" / f), read_bytes(tmp / "b" / f)) << f;
  }
}

// Learnable: a nearest-class-mean classifier, far weaker than a CNN, already beats chance by a
// wide margin. Not trivial: same-class images differ (noise, shifts, colour casts).
TEST(Synthetic, LearnableButNoisy) {
  TempDir tmp;
  write_synthetic_cifar10(tmp.path(), options(500, 200, 10, 3));
  const TrainTest tt = read_cifar10(tmp.path());
  constexpr int kClasses = 10;
  std::vector<std::vector<double>> mean(kClasses, std::vector<double>(3072, 0.0));
  std::array<int, kClasses> count{};
  for (int64_t i = 0; i < tt.train.size(); ++i) {
    const auto c = static_cast<size_t>(tt.train.labels[static_cast<size_t>(i)]);
    ++count[c];
    for (int k = 0; k < 3072; ++k) mean[c][static_cast<size_t>(k)] += tt.train.image(i)[k];
  }
  for (int c = 0; c < kClasses; ++c) {
    ASSERT_GT(count[static_cast<size_t>(c)], 20) << "class " << c << " too rare";
    for (auto& v : mean[static_cast<size_t>(c)]) v /= count[static_cast<size_t>(c)];
  }
  int correct = 0;
  for (int64_t i = 0; i < tt.test.size(); ++i) {
    int best = -1;
    double best_d = 0;
    for (int c = 0; c < kClasses; ++c) {
      double d = 0;
      for (int k = 0; k < 3072; ++k) {
        const double diff =
            tt.test.image(i)[k] - mean[static_cast<size_t>(c)][static_cast<size_t>(k)];
        d += diff * diff;
      }
      if (best < 0 || d < best_d) {
        best = c;
        best_d = d;
      }
    }
    correct += best == tt.test.labels[static_cast<size_t>(i)] ? 1 : 0;
  }
  EXPECT_GT(correct, 160) << "nearest-mean accuracy " << correct << "/200";

  // Two images of the same class are never identical.
  for (int64_t i = 1; i < tt.train.size(); ++i) {
    if (tt.train.labels[static_cast<size_t>(i)] == tt.train.labels[0]) {
      EXPECT_FALSE(std::equal(tt.train.image(0), tt.train.image(0) + 3072, tt.train.image(i)));
    }
  }
}

TEST(Synthetic, RejectsBadOptions) {
  TempDir tmp;
  EXPECT_THROW(write_synthetic_cifar10(tmp.path(), options(10, 5, 11)), std::invalid_argument);
  EXPECT_THROW(write_synthetic_cifar10(tmp.path(), options(10, 5, 0)), std::invalid_argument);
  EXPECT_THROW(write_synthetic_cifar10(tmp.path(), options(4, 5)), std::invalid_argument);
  EXPECT_THROW(write_synthetic_cifar10(tmp.path(), options(10, 0)), std::invalid_argument);
}

}  // namespace
}  // namespace cifar::data
