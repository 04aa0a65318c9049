// CIFAR-10 / CIFAR-100 binary readers and the CIFAR-10 writer.
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>
#include <system_error>

#include "data/dataset.h"
#include "health/waits.h"

namespace cifar::data {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kImageBytes = int64_t{3} * 32 * 32;

// A binary record layout: `label_bytes` label bytes, each checked against its limit, then one
// 3x32x32 image.
struct RecordFormat {
  const char* kind;
  int label_bytes;
  std::array<int, 2> label_limits;
  std::array<const char*, 2> label_names;
  [[nodiscard]] int64_t record_bytes() const { return label_bytes + kImageBytes; }
};

constexpr RecordFormat kCifar10{"CIFAR-10", 1, {10, 0}, {"label", ""}};
constexpr RecordFormat kCifar100{"CIFAR-100", 2, {20, 100}, {"coarse label", "fine label"}};

std::vector<uint8_t> read_whole_file(const fs::path& file, const char* kind) {
  std::error_code ec;
  const auto status = fs::status(file, ec);
  if (!fs::exists(status)) {
    throw DataError(std::string(kind) + " file " + quoted_path(file) + " not found");
  }
  if (!fs::is_regular_file(status)) {
    throw DataError(std::string(kind) + " file " + quoted_path(file) + " is not a regular file");
  }
  const health::Wait in_flight(std::string("read of ") + kind + " file " + file.string(), "");
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    throw DataError(std::string(kind) + " file " + quoted_path(file) +
                    " cannot be opened: " + std::strerror(errno));
  }
  const auto size = fs::file_size(file, ec);
  if (ec) {
    throw DataError(std::string(kind) + " file " + quoted_path(file) + ": " + ec.message());
  }
  std::vector<uint8_t> bytes(size);
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(size));
  if (static_cast<uintmax_t>(in.gcount()) != size) {
    throw DataError(std::string(kind) + " file " + quoted_path(file) +
                    ": read error at byte offset " + std::to_string(in.gcount()) + " of " +
                    std::to_string(size));
  }
  return bytes;
}

// Appends the records of one file to `out`, keeping label number `use_label`, after checking the
// size and every label byte (a wrong label would otherwise surface much later, mid-training).
void parse_records(const fs::path& file, const RecordFormat& format, int use_label, Dataset& out) {
  const std::vector<uint8_t> bytes = read_whole_file(file, format.kind);
  const auto size = static_cast<int64_t>(bytes.size());
  const int64_t record = format.record_bytes();
  if (size == 0) {
    throw DataError(std::string(format.kind) + " file " + quoted_path(file) + " is empty");
  }
  if (size % record != 0) {
    const int64_t last = size / record * record;
    throw DataError(std::string(format.kind) + " file " + quoted_path(file) +
                    " is truncated: " + std::to_string(size) + " bytes is not a multiple of the " +
                    std::to_string(record) + "-byte record; the record at byte offset " +
                    std::to_string(last) + " has only " + std::to_string(size - last) + " bytes");
  }
  const int64_t count = size / record;
  const int64_t first = out.size();
  out.labels.resize(static_cast<size_t>(first + count));
  out.images.resize(static_cast<size_t>((first + count) * kImageBytes));
  for (int64_t i = 0; i < count; ++i) {
    const uint8_t* rec = bytes.data() + i * record;
    for (int l = 0; l < format.label_bytes; ++l) {
      if (rec[l] >= format.label_limits[l]) {
        throw DataError(std::string(format.kind) + " file " + quoted_path(file) + ": record " +
                        std::to_string(i) + " at byte offset " + std::to_string(i * record + l) +
                        " has " + format.label_names[l] + " " + std::to_string(rec[l]) +
                        ", outside [0, " + std::to_string(format.label_limits[l]) + ")");
      }
    }
    out.labels[static_cast<size_t>(first + i)] = rec[use_label];
    std::memcpy(out.images.data() + (first + i) * kImageBytes, rec + format.label_bytes,
                kImageBytes);
  }
}

Dataset empty_dataset(const char* name, int64_t num_classes) {
  Dataset d;
  d.name = name;
  d.channels = 3;
  d.height = 32;
  d.width = 32;
  d.num_classes = num_classes;
  return d;
}

// The directory holding the files: `dir` itself, or the archive's top directory inside it.
fs::path resolve_dir(const fs::path& dir, const char* subdir, const char* probe) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw DataError("data directory " + quoted_path(dir) + " not found");
  }
  if (!fs::exists(dir / probe, ec) && fs::is_directory(dir / subdir, ec)) return dir / subdir;
  return dir;
}

}  // namespace

const CifarLayout& cifar_layout(std::string_view dataset) {
  static const CifarLayout cifar10{"cifar-10-batches-bin",
                                   {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
                                    "data_batch_4.bin", "data_batch_5.bin", "test_batch.bin"},
                                   {10000, 10000, 10000, 10000, 10000, 10000},
                                   kCifar10.record_bytes()};
  static const CifarLayout cifar100{
      "cifar-100-binary", {"train.bin", "test.bin"}, {50000, 10000}, kCifar100.record_bytes()};
  if (dataset == "cifar10") return cifar10;
  if (dataset == "cifar100") return cifar100;
  throw DataError("no CIFAR binary layout for dataset '" + std::string(dataset) + "'");
}

Dataset read_cifar10_file(const fs::path& file) {
  Dataset d = empty_dataset("cifar10", 10);
  parse_records(file, kCifar10, 0, d);
  return d;
}

TrainTest read_cifar10(const fs::path& dir) {
  const auto& layout = cifar_layout("cifar10");
  const fs::path root = resolve_dir(dir, layout.top_dir.c_str(), layout.files.front().c_str());
  TrainTest tt{empty_dataset("cifar10", 10), empty_dataset("cifar10", 10)};
  for (size_t i = 0; i + 1 < layout.files.size(); ++i) {
    parse_records(root / layout.files[i], kCifar10, 0, tt.train);
  }
  parse_records(root / layout.files.back(), kCifar10, 0, tt.test);
  return tt;
}

TrainTest read_cifar100(const fs::path& dir, Cifar100Labels labels) {
  const auto& layout = cifar_layout("cifar100");
  const fs::path root = resolve_dir(dir, layout.top_dir.c_str(), layout.files.front().c_str());
  const bool fine = labels == Cifar100Labels::kFine;
  const int64_t classes = fine ? 100 : 20;
  TrainTest tt{empty_dataset("cifar100", classes), empty_dataset("cifar100", classes)};
  parse_records(root / "train.bin", kCifar100, fine ? 1 : 0, tt.train);
  parse_records(root / "test.bin", kCifar100, fine ? 1 : 0, tt.test);
  return tt;
}

void write_cifar10_file(const fs::path& file, const Dataset& data) {
  if (data.channels != 3 || data.height != 32 || data.width != 32) {
    throw std::invalid_argument("write_cifar10_file: images must be 3x32x32, got " +
                                std::to_string(data.channels) + "x" + std::to_string(data.height) +
                                "x" + std::to_string(data.width));
  }
  if (static_cast<int64_t>(data.images.size()) != data.size() * kImageBytes) {
    throw std::invalid_argument("write_cifar10_file: " + std::to_string(data.images.size()) +
                                " image bytes for " + std::to_string(data.size()) + " labels");
  }
  std::vector<uint8_t> bytes(static_cast<size_t>(data.size() * kCifar10.record_bytes()));
  for (int64_t i = 0; i < data.size(); ++i) {
    const int32_t label = data.labels[static_cast<size_t>(i)];
    if (label < 0 || label >= 10) {
      throw std::invalid_argument("write_cifar10_file: label " + std::to_string(label) +
                                  " of sample " + std::to_string(i) + " outside [0, 10)");
    }
    uint8_t* rec = bytes.data() + i * kCifar10.record_bytes();
    rec[0] = static_cast<uint8_t>(label);
    std::memcpy(rec + 1, data.image(i), kImageBytes);
  }
  // Write then rename, so a crash never leaves a truncated file under the real name. The temp
  // name is per process: the processes of a local job may all write the same synthetic files.
  fs::path tmp = file;
  tmp += "." + std::to_string(::getpid()) + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) {
      std::error_code ec;
      fs::remove(tmp, ec);
      throw DataError("cannot write CIFAR-10 file " + quoted_path(tmp) + ": " +
                      std::strerror(errno));
    }
  }
  std::error_code ec;
  fs::rename(tmp, file, ec);
  if (ec) {
    const std::string why = ec.message();
    fs::remove(tmp, ec);
    throw DataError("cannot rename " + quoted_path(tmp) + " to " + quoted_path(file) + ": " + why);
  }
}

}  // namespace cifar::data
