// CIFAR-10/100 and Fashion-MNIST readers on good and corrupt files; channel statistics.
#include <gtest/gtest.h>
#include <zlib.h>

#include <array>
#include <cmath>
#include <string>

#include "data/dataset.h"
#include "tests/runtime/data/test_util.h"

namespace cifar::data {
namespace {

namespace fs = std::filesystem;
using testing::expect_data_error;
using testing::make_dataset;
using testing::read_bytes;
using testing::TempDir;
using testing::write_bytes;

constexpr int64_t kRecord10 = 3073;
constexpr int64_t kRecord100 = 3074;

// Six CIFAR-10 files under `dir`, train file i holding 3 + i records.
Dataset write_cifar10_dir(const fs::path& dir) {
  fs::create_directories(dir);
  Dataset all = make_dataset(3 + 4 + 5 + 6 + 7 + 4);
  int64_t at = 0;
  for (int f = 1; f <= 6; ++f) {
    const int64_t n = f <= 5 ? 2 + f : 4;
    Dataset part = make_dataset(0);
    part.labels.assign(all.labels.begin() + at, all.labels.begin() + at + n);
    part.images.assign(all.images.begin() + at * 3072, all.images.begin() + (at + n) * 3072);
    write_cifar10_file(
        dir / (f <= 5 ? "data_batch_" + std::to_string(f) + ".bin" : "test_batch.bin"), part);
    at += n;
  }
  return all;
}

std::vector<uint8_t> cifar100_records(const std::vector<std::array<uint8_t, 2>>& labels) {
  std::vector<uint8_t> bytes;
  for (size_t i = 0; i < labels.size(); ++i) {
    bytes.push_back(labels[i][0]);
    bytes.push_back(labels[i][1]);
    for (int k = 0; k < 3072; ++k) bytes.push_back(static_cast<uint8_t>(i * 17 + k));
  }
  return bytes;
}

TEST(Cifar10, FileRoundTrip) {
  TempDir tmp;
  const Dataset d = make_dataset(7);
  write_cifar10_file(tmp / "x.bin", d);
  EXPECT_EQ(fs::file_size(tmp / "x.bin"), 7U * kRecord10);
  const Dataset r = read_cifar10_file(tmp / "x.bin");
  EXPECT_EQ(r.name, "cifar10");
  EXPECT_EQ(r.num_classes, 10);
  EXPECT_EQ(r.channels, 3);
  EXPECT_EQ(r.height, 32);
  EXPECT_EQ(r.width, 32);
  EXPECT_EQ(r.labels, d.labels);
  EXPECT_EQ(r.images, d.images);
  EXPECT_FALSE(fs::exists(tmp / "x.bin.tmp"));
}

TEST(Cifar10, ReadsDirectoryOrItsParent) {
  TempDir tmp;
  const Dataset all = write_cifar10_dir(tmp / "cifar-10-batches-bin");
  for (const fs::path& dir : {tmp.path(), tmp / "cifar-10-batches-bin"}) {
    const TrainTest tt = read_cifar10(dir);
    ASSERT_EQ(tt.train.size(), 25);
    ASSERT_EQ(tt.test.size(), 4);
    // Train files are concatenated in order 1..5, then the test file follows in `all`.
    EXPECT_TRUE(std::equal(tt.train.labels.begin(), tt.train.labels.end(), all.labels.begin()));
    EXPECT_TRUE(std::equal(tt.train.images.begin(), tt.train.images.end(), all.images.begin()));
    EXPECT_TRUE(std::equal(tt.test.images.begin(), tt.test.images.end(),
                           all.images.begin() + int64_t{25} * 3072));
  }
}

TEST(Cifar10, MissingFileNamesIt) {
  TempDir tmp;
  write_cifar10_dir(tmp.path());
  fs::remove(tmp / "data_batch_3.bin");
  expect_data_error([&] { read_cifar10(tmp.path()); },
                    {(tmp / "data_batch_3.bin").string(), "not found"});
}

TEST(Cifar10, MissingDirectory) {
  TempDir tmp;
  expect_data_error([&] { read_cifar10(tmp / "nope"); }, {(tmp / "nope").string(), "not found"});
}

TEST(Cifar10, TruncatedFileNamesFileAndOffset) {
  TempDir tmp;
  write_cifar10_file(tmp / "x.bin", make_dataset(3));
  fs::resize_file(tmp / "x.bin", 3 * kRecord10 - 100);
  expect_data_error([&] { read_cifar10_file(tmp / "x.bin"); },
                    {(tmp / "x.bin").string(), "truncated", "byte offset 6146",
                     std::to_string(kRecord10 - 100) + " bytes"});
}

TEST(Cifar10, TruncatedTrainBatchInDirectory) {
  TempDir tmp;
  write_cifar10_dir(tmp.path());
  fs::resize_file(tmp / "data_batch_5.bin", 10);
  expect_data_error([&] { read_cifar10(tmp.path()); },
                    {(tmp / "data_batch_5.bin").string(), "byte offset 0"});
}

TEST(Cifar10, EmptyFile) {
  TempDir tmp;
  write_bytes(tmp / "x.bin", {});
  expect_data_error([&] { read_cifar10_file(tmp / "x.bin"); }, {(tmp / "x.bin").string(), "empty"});
}

TEST(Cifar10, LabelOutOfRangeNamesRecordOffsetAndValue) {
  TempDir tmp;
  write_cifar10_file(tmp / "x.bin", make_dataset(4));
  auto bytes = read_bytes(tmp / "x.bin");
  bytes[2 * kRecord10] = 10;
  write_bytes(tmp / "x.bin", bytes);
  expect_data_error([&] { read_cifar10_file(tmp / "x.bin"); },
                    {(tmp / "x.bin").string(), "record 2", "byte offset 6146", "label 10"});
}

TEST(Cifar10, WriterRejectsWhatTheReaderWouldReject) {
  TempDir tmp;
  Dataset d = make_dataset(2);
  d.labels[1] = 10;
  EXPECT_THROW(write_cifar10_file(tmp / "x.bin", d), std::invalid_argument);
  EXPECT_THROW(write_cifar10_file(tmp / "y.bin", make_dataset(2, 1, 32, 32)),
               std::invalid_argument);
  EXPECT_FALSE(fs::exists(tmp / "x.bin"));
}

TEST(Cifar100, FineAndCoarseLabelsFromDirectoryOrParent) {
  TempDir tmp;
  const fs::path dir = tmp / "cifar-100-binary";
  fs::create_directories(dir);
  write_bytes(dir / "train.bin", cifar100_records({{0, 99}, {19, 5}, {7, 42}}));
  write_bytes(dir / "test.bin", cifar100_records({{3, 3}, {4, 60}}));
  for (const fs::path& d : {tmp.path(), dir}) {
    const TrainTest fine = read_cifar100(d, Cifar100Labels::kFine);
    EXPECT_EQ(fine.train.name, "cifar100");
    EXPECT_EQ(fine.train.num_classes, 100);
    EXPECT_EQ(fine.train.labels, (std::vector<int32_t>{99, 5, 42}));
    EXPECT_EQ(fine.test.labels, (std::vector<int32_t>{3, 60}));
    ASSERT_EQ(fine.train.images.size(), 3U * 3072);
    EXPECT_EQ(fine.train.images[3072], static_cast<uint8_t>(17));  // record 1, byte 0
    const TrainTest coarse = read_cifar100(d, Cifar100Labels::kCoarse);
    EXPECT_EQ(coarse.train.num_classes, 20);
    EXPECT_EQ(coarse.train.labels, (std::vector<int32_t>{0, 19, 7}));
    EXPECT_EQ(coarse.train.images, fine.train.images);
  }
}

TEST(Cifar100, BadFineLabel) {
  TempDir tmp;
  write_bytes(tmp / "train.bin", cifar100_records({{0, 1}, {1, 2}, {2, 100}}));
  write_bytes(tmp / "test.bin", cifar100_records({{0, 1}}));
  expect_data_error([&] { read_cifar100(tmp.path(), Cifar100Labels::kCoarse); },
                    {(tmp / "train.bin").string(), "record 2",
                     "byte offset " + std::to_string(2 * kRecord100 + 1), "fine label 100"});
}

TEST(Cifar100, BadCoarseLabel) {
  TempDir tmp;
  write_bytes(tmp / "train.bin", cifar100_records({{0, 1}}));
  write_bytes(tmp / "test.bin", cifar100_records({{0, 1}, {20, 2}}));
  expect_data_error([&] { read_cifar100(tmp.path(), Cifar100Labels::kFine); },
                    {(tmp / "test.bin").string(), "record 1",
                     "byte offset " + std::to_string(kRecord100), "coarse label 20"});
}

TEST(Cifar100, Cifar10RecordsAreTheWrongSize) {
  TempDir tmp;
  write_cifar10_file(tmp / "train.bin", make_dataset(5));  // 5 * 3073 is no multiple of 3074
  write_bytes(tmp / "test.bin", cifar100_records({{0, 1}}));
  expect_data_error([&] { read_cifar100(tmp.path(), Cifar100Labels::kFine); },
                    {(tmp / "train.bin").string(), "not a multiple of the 3074-byte record",
                     "byte offset " + std::to_string(4 * kRecord100)});
}

TEST(Cifar100, MissingTestFile) {
  TempDir tmp;
  write_bytes(tmp / "train.bin", cifar100_records({{0, 1}}));
  expect_data_error([&] { read_cifar100(tmp.path(), Cifar100Labels::kFine); },
                    {(tmp / "test.bin").string(), "not found"});
}

// ---- Fashion-MNIST ----

void put_be32(std::vector<uint8_t>& v, uint32_t x) {
  for (int s = 24; s >= 0; s -= 8) v.push_back(static_cast<uint8_t>(x >> static_cast<unsigned>(s)));
}

std::vector<uint8_t> idx_images(uint32_t n, uint32_t magic = 2051, uint32_t side = 28) {
  std::vector<uint8_t> v;
  put_be32(v, magic);
  put_be32(v, n);
  put_be32(v, side);
  put_be32(v, side);
  for (uint32_t i = 0; i < n * side * side; ++i) v.push_back(static_cast<uint8_t>(1 + i % 251));
  return v;
}

std::vector<uint8_t> idx_labels(uint32_t n, uint32_t magic = 2049) {
  std::vector<uint8_t> v;
  put_be32(v, magic);
  put_be32(v, n);
  for (uint32_t i = 0; i < n; ++i) v.push_back(static_cast<uint8_t>(i % 10));
  return v;
}

void write_gz(const fs::path& file, const std::vector<uint8_t>& bytes) {
  gzFile f = gzopen(file.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())),
            static_cast<int>(bytes.size()));
  ASSERT_EQ(gzclose(f), Z_OK);
}

// A small Fashion-MNIST-layout directory: train 5 images, test 3; gzip or plain.
void write_fmnist(const fs::path& dir, bool gz) {
  const auto put = [&](const std::string& name, const std::vector<uint8_t>& bytes) {
    if (gz) {
      write_gz(dir / (name + ".gz"), bytes);
    } else {
      write_bytes(dir / name, bytes);
    }
  };
  put("train-images-idx3-ubyte", idx_images(5));
  put("train-labels-idx1-ubyte", idx_labels(5));
  put("t10k-images-idx3-ubyte", idx_images(3));
  put("t10k-labels-idx1-ubyte", idx_labels(3));
}

TEST(FashionMnist, SmallFilesGzipAndPlainArePadded) {
  for (bool gz : {true, false}) {
    TempDir tmp;
    write_fmnist(tmp.path(), gz);
    const TrainTest tt = read_fashion_mnist(tmp.path());
    ASSERT_EQ(tt.train.size(), 5);
    ASSERT_EQ(tt.test.size(), 3);
    EXPECT_EQ(tt.train.name, "fashion-mnist");
    EXPECT_EQ(tt.train.channels, 1);
    EXPECT_EQ(tt.train.height, 32);
    EXPECT_EQ(tt.train.width, 32);
    EXPECT_EQ(tt.train.num_classes, 10);
    EXPECT_EQ(tt.train.labels, (std::vector<int32_t>{0, 1, 2, 3, 4}));
    const auto src = idx_images(5);
    for (int64_t i = 0; i < 5; ++i) {
      for (int64_t y = 0; y < 32; ++y) {
        for (int64_t x = 0; x < 32; ++x) {
          const bool inside = y >= 2 && y < 30 && x >= 2 && x < 30;
          const uint8_t expected =
              inside ? src[static_cast<size_t>(16 + i * 784 + (y - 2) * 28 + (x - 2))] : 0;
          ASSERT_EQ(tt.train.image(i)[y * 32 + x], expected) << i << " " << y << " " << x;
        }
      }
    }
  }
}

TEST(FashionMnist, RealDebianFiles) {
  const fs::path dir = "/usr/share/datasets/fashion-mnist";
  ASSERT_TRUE(fs::exists(dir / "train-images-idx3-ubyte.gz"))
      << "install dataset-fashion-mnist (scripts/install-deps.sh)";
  const TrainTest tt = read_fashion_mnist(dir);
  ASSERT_EQ(tt.train.size(), 60000);
  ASSERT_EQ(tt.test.size(), 10000);
  for (const Dataset* d : {&tt.train, &tt.test}) {
    EXPECT_EQ(d->channels, 1);
    EXPECT_EQ(d->height, 32);
    EXPECT_EQ(d->width, 32);
    ASSERT_EQ(d->images.size(), static_cast<size_t>(d->size()) * 1024);
    std::array<int64_t, 10> per_class{};
    for (int32_t l : d->labels) {
      ASSERT_GE(l, 0);
      ASSERT_LT(l, 10);
      ++per_class[static_cast<size_t>(l)];
    }
    for (int64_t c : per_class) EXPECT_EQ(c, d->size() / 10);  // Fashion-MNIST is balanced
    uint64_t border = 0;
    uint64_t inner = 0;
    for (int64_t i = 0; i < d->size(); ++i) {
      const uint8_t* img = d->image(i);
      for (int64_t y = 0; y < 32; ++y) {
        for (int64_t x = 0; x < 32; ++x) {
          const bool inside = y >= 2 && y < 30 && x >= 2 && x < 30;
          (inside ? inner : border) += img[y * 32 + x];
        }
      }
    }
    EXPECT_EQ(border, 0U);
    EXPECT_GT(inner, 0U);
  }
}

TEST(FashionMnist, BadImagesMagic) {
  TempDir tmp;
  write_fmnist(tmp.path(), false);
  write_bytes(tmp / "train-images-idx3-ubyte", idx_images(5, 2049));
  expect_data_error([&] { read_fashion_mnist(tmp.path()); },
                    {(tmp / "train-images-idx3-ubyte").string(), "bad IDX magic 2049",
                     "byte offset 0", "expected 2051"});
}

TEST(FashionMnist, BadLabelsMagicInGzip) {
  TempDir tmp;
  write_fmnist(tmp.path(), true);
  write_gz(tmp / "t10k-labels-idx1-ubyte.gz", idx_labels(3, 2051));
  expect_data_error(
      [&] { read_fashion_mnist(tmp.path()); },
      {(tmp / "t10k-labels-idx1-ubyte.gz").string(), "bad IDX magic 2051", "byte offset 0"});
}

TEST(FashionMnist, WrongImageSize) {
  TempDir tmp;
  write_fmnist(tmp.path(), false);
  write_bytes(tmp / "train-images-idx3-ubyte", idx_images(5, 2051, 27));
  expect_data_error([&] { read_fashion_mnist(tmp.path()); },
                    {(tmp / "train-images-idx3-ubyte").string(), "27x27", "byte offset 8"});
}

TEST(FashionMnist, TruncatedImages) {
  TempDir tmp;
  write_fmnist(tmp.path(), false);
  auto bytes = idx_images(5);
  bytes.resize(16 + 3 * 784 + 100);
  write_bytes(tmp / "train-images-idx3-ubyte", bytes);
  expect_data_error([&] { read_fashion_mnist(tmp.path()); },
                    {(tmp / "train-images-idx3-ubyte").string(), "truncated",
                     "byte offset " + std::to_string(16 + 3 * 784)});
}

TEST(FashionMnist, TrailingBytes) {
  TempDir tmp;
  write_fmnist(tmp.path(), false);
  auto bytes = idx_labels(5);
  bytes.push_back(1);
  write_bytes(tmp / "train-labels-idx1-ubyte", bytes);
  expect_data_error([&] { read_fashion_mnist(tmp.path()); },
                    {(tmp / "train-labels-idx1-ubyte").string(), "byte offset 13"});
}

TEST(FashionMnist, TruncatedGzipStream) {
  TempDir tmp;
  write_fmnist(tmp.path(), true);
  const fs::path file = tmp / "train-images-idx3-ubyte.gz";
  fs::resize_file(file, fs::file_size(file) / 2);
  expect_data_error([&] { read_fashion_mnist(tmp.path()); }, {file.string(), "truncated"});
}

TEST(FashionMnist, HeaderShorterThanIdxHeader) {
  TempDir tmp;
  write_fmnist(tmp.path(), false);
  write_bytes(tmp / "t10k-labels-idx1-ubyte", {0, 0, 8});
  expect_data_error([&] { read_fashion_mnist(tmp.path()); },
                    {(tmp / "t10k-labels-idx1-ubyte").string(), "8-byte IDX header"});
}

TEST(FashionMnist, CountMismatchNamesBothFiles) {
  TempDir tmp;
  write_fmnist(tmp.path(), false);
  write_bytes(tmp / "t10k-labels-idx1-ubyte", idx_labels(4));
  expect_data_error([&] { read_fashion_mnist(tmp.path()); },
                    {(tmp / "t10k-images-idx3-ubyte").string(),
                     (tmp / "t10k-labels-idx1-ubyte").string(), "3 images", "4 labels"});
}

TEST(FashionMnist, LabelOutOfRange) {
  TempDir tmp;
  write_fmnist(tmp.path(), false);
  auto bytes = idx_labels(5);
  bytes[8 + 3] = 10;
  write_bytes(tmp / "train-labels-idx1-ubyte", bytes);
  expect_data_error(
      [&] { read_fashion_mnist(tmp.path()); },
      {(tmp / "train-labels-idx1-ubyte").string(), "label 10", "record 3", "byte offset 11"});
}

TEST(FashionMnist, MissingFile) {
  TempDir tmp;
  write_fmnist(tmp.path(), true);
  fs::remove(tmp / "t10k-images-idx3-ubyte.gz");
  expect_data_error([&] { read_fashion_mnist(tmp.path()); },
                    {(tmp / "t10k-images-idx3-ubyte.gz").string(), "not found"});
  expect_data_error([&] { read_fashion_mnist(tmp / "nope"); }, {(tmp / "nope").string()});
}

// ---- statistics ----

TEST(ChannelStats, MatchesDirectComputation) {
  const Dataset d = make_dataset(20);
  const ChannelStats s = channel_stats(d);
  ASSERT_EQ(s.mean.size(), 3U);
  ASSERT_EQ(s.stddev.size(), 3U);
  for (int64_t c = 0; c < 3; ++c) {
    double sum = 0;
    double sq = 0;
    for (int64_t i = 0; i < d.size(); ++i) {
      for (int64_t k = 0; k < 1024; ++k) {
        const double v = d.image(i)[c * 1024 + k] / 255.0;
        sum += v;
        sq += v * v;
      }
    }
    const double n = 20.0 * 1024;
    const double mean = sum / n;
    EXPECT_NEAR(s.mean[static_cast<size_t>(c)], mean, 1e-6);
    EXPECT_NEAR(s.stddev[static_cast<size_t>(c)], std::sqrt(sq / n - mean * mean), 1e-6);
  }
}

TEST(ChannelStats, ConstantChannels) {
  const Dataset d = make_dataset(
      4, 2, 8, 8, 10, [](int64_t, int64_t k) { return static_cast<uint8_t>(k < 64 ? 51 : 255); });
  const ChannelStats s = channel_stats(d);
  EXPECT_FLOAT_EQ(s.mean[0], 0.2F);
  EXPECT_FLOAT_EQ(s.mean[1], 1.0F);
  EXPECT_NEAR(s.stddev[0], 0.0F, 1e-6);
  EXPECT_THROW(channel_stats(make_dataset(0)), DataError);
}

}  // namespace
}  // namespace cifar::data
