// In-memory image classification datasets as uint8, and the readers that fill them.
#pragma once

#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace cifar::data {

// Thrown for every bad input (missing, truncated or wrongly sized file, label out of range, bad
// checksum). The message names the file and, where it applies, the byte offset.
class DataError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
// The dataset's source holds nothing this run can read, or refused it (a missing object, one of
// the wrong size, wrong keys): a restart would meet the same (contract::kExitDataUnavailable).
class DatasetUnavailable : public DataError {
 public:
  using DataError::DataError;
};

// A path as DataError's messages quote it.
inline std::string quoted_path(const std::filesystem::path& file) {
  return "\"" + file.string() + "\"";
}

// Images stored planar (N x C x H x W), one byte per value, labels in [0, num_classes).
struct Dataset {
  std::string name;
  int64_t channels = 3;
  int64_t height = 32;
  int64_t width = 32;
  int64_t num_classes = 10;
  std::vector<uint8_t> images;
  std::vector<int32_t> labels;

  [[nodiscard]] int64_t size() const { return static_cast<int64_t>(labels.size()); }
  [[nodiscard]] int64_t image_bytes() const { return channels * height * width; }
  [[nodiscard]] const uint8_t* image(int64_t i) const { return images.data() + i * image_bytes(); }
};

struct TrainTest {
  Dataset train;
  Dataset test;
};

enum class Cifar100Labels { kFine, kCoarse };

// The files of a CIFAR binary version as its official archive unpacks: the archive's top
// directory, the files in reading order, the records of each in the official archive (a file may
// hold fewer, a slice, never more) and the bytes of one record (a file holds whole ones).
struct CifarLayout {
  std::string top_dir;
  std::vector<std::string> files;
  std::vector<int64_t> records;
  int64_t record_bytes = 0;
};
// "cifar10" or "cifar100"; DataError otherwise.
const CifarLayout& cifar_layout(std::string_view dataset);

// CIFAR-10 binary version: <dir>/data_batch_{1..5}.bin and <dir>/test_batch.bin; <dir> may also
// be the parent of the archive's cifar-10-batches-bin/.
TrainTest read_cifar10(const std::filesystem::path& dir);
// CIFAR-100 binary version: <dir>/train.bin and <dir>/test.bin (coarse label, fine label, image);
// <dir> may also be the parent of the archive's cifar-100-binary/.
TrainTest read_cifar100(const std::filesystem::path& dir, Cifar100Labels labels);
// Fashion-MNIST IDX files (gzip or plain), 28x28 padded with zeros to 32x32, one channel.
TrainTest read_fashion_mnist(const std::filesystem::path& dir);

// One CIFAR-10-format file: records of (label byte, 3072 image bytes). Exposed for tests/tools.
Dataset read_cifar10_file(const std::filesystem::path& file);
// Writes `data` (3x32x32) as CIFAR-10 binary records.
void write_cifar10_file(const std::filesystem::path& file, const Dataset& data);

// A synthetic dataset with learnable class structure (each class a smooth prototype pattern,
// samples are shifted, noisy, brightness-jittered copies), written as real CIFAR-10 binary files
// (data_batch_1..5.bin, test_batch.bin) into `dir`. Deterministic in `seed`.
struct SyntheticOptions {
  int64_t train_size = 5000;
  int64_t test_size = 1000;
  int64_t num_classes = 10;
  uint64_t seed = 1;
};
void write_synthetic_cifar10(const std::filesystem::path& dir, const SyntheticOptions& options);

// Per-channel mean and standard deviation of a dataset, in [0, 1] units.
struct ChannelStats {
  std::vector<float> mean;
  std::vector<float> stddev;
};
ChannelStats channel_stats(const Dataset& data);

}  // namespace cifar::data
