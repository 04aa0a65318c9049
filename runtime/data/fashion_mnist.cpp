// Fashion-MNIST IDX reader (gzip or plain), padding 28x28 to 32x32 so models are shared with CIFAR.
#include <zlib.h>

#include <algorithm>
#include <memory>
#include <string>
#include <system_error>
#include <type_traits>

#include "data/dataset.h"

namespace cifar::data {
namespace {

namespace fs = std::filesystem;

constexpr uint32_t kImagesMagic = 2051;  // 0x00000803: unsigned bytes, 3 dimensions
constexpr uint32_t kLabelsMagic = 2049;  // 0x00000801: unsigned bytes, 1 dimension
constexpr int64_t kMnistSide = 28;
constexpr int64_t kPaddedSide = 32;
constexpr int64_t kPad = (kPaddedSide - kMnistSide) / 2;
constexpr int64_t kClasses = 10;

struct GzClose {
  void operator()(gzFile f) const { gzclose(f); }
};
using GzHandle = std::unique_ptr<std::remove_pointer_t<gzFile>, GzClose>;

// Whole (decompressed) contents; zlib reads plain files transparently, so one path serves both.
std::vector<uint8_t> read_idx_bytes(const fs::path& file) {
  GzHandle f(gzopen(file.c_str(), "rb"));
  if (!f) throw DataError("Fashion-MNIST file " + quoted_path(file) + " cannot be opened");
  gzbuffer(f.get(), 1U << 17U);
  std::vector<uint8_t> bytes;
  constexpr size_t kChunk = 1U << 20U;
  for (;;) {
    const size_t old = bytes.size();
    bytes.resize(old + kChunk);
    const int n = gzread(f.get(), bytes.data() + old, static_cast<unsigned>(kChunk));
    bytes.resize(old + static_cast<size_t>(n > 0 ? n : 0));
    if (n <= 0) break;
  }
  int err = Z_OK;
  const char* msg = gzerror(f.get(), &err);
  if (err != Z_OK) {
    throw DataError("Fashion-MNIST file " + quoted_path(file) +
                    ": corrupt or truncated gzip stream after " + std::to_string(bytes.size()) +
                    " decompressed bytes: " + msg);
  }
  return bytes;
}

// `<dir>/<stem>.gz`, else `<dir>/<stem>`.
fs::path find_idx(const fs::path& dir, const std::string& stem) {
  std::error_code ec;
  fs::path gz = dir / (stem + ".gz");
  if (fs::exists(gz, ec)) return gz;
  fs::path plain = dir / stem;
  if (fs::exists(plain, ec)) return plain;
  throw DataError("Fashion-MNIST file " + quoted_path(gz) + " (or uncompressed " +
                  quoted_path(plain) + ") not found");
}

uint32_t big_endian32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24U) | (uint32_t{p[1]} << 16U) | (uint32_t{p[2]} << 8U) |
         uint32_t{p[3]};
}

void check_magic(const fs::path& file, const std::vector<uint8_t>& bytes, uint32_t expected,
                 size_t header_bytes) {
  if (bytes.size() < header_bytes) {
    throw DataError("Fashion-MNIST file " + quoted_path(file) +
                    " is truncated: " + std::to_string(bytes.size()) + " bytes, shorter than the " +
                    std::to_string(header_bytes) + "-byte IDX header");
  }
  const uint32_t magic = big_endian32(bytes.data());
  if (magic != expected) {
    throw DataError("Fashion-MNIST file " + quoted_path(file) + ": bad IDX magic " +
                    std::to_string(magic) + " at byte offset 0, expected " +
                    std::to_string(expected) +
                    (expected == kImagesMagic ? " (images)" : " (labels)"));
  }
}

void check_size(const fs::path& file, size_t actual, size_t header, size_t count, size_t item) {
  const size_t expected = header + count * item;
  if (actual < expected) {
    const size_t last = header + (actual - header) / item * item;
    throw DataError("Fashion-MNIST file " + quoted_path(file) +
                    " is truncated: the header declares " + std::to_string(count) + " items (" +
                    std::to_string(expected) + " bytes) but it has " + std::to_string(actual) +
                    " bytes; the item at byte offset " + std::to_string(last) + " is incomplete");
  }
  if (actual > expected) {
    throw DataError("Fashion-MNIST file " + quoted_path(file) + " has " +
                    std::to_string(actual - expected) + " unexpected bytes from byte offset " +
                    std::to_string(expected) + " on, after its " + std::to_string(count) +
                    " declared items");
  }
}

Dataset read_split(const fs::path& dir, const std::string& prefix) {
  const fs::path images_file = find_idx(dir, prefix + "-images-idx3-ubyte");
  const fs::path labels_file = find_idx(dir, prefix + "-labels-idx1-ubyte");

  const std::vector<uint8_t> images = read_idx_bytes(images_file);
  check_magic(images_file, images, kImagesMagic, 16);
  const uint32_t count = big_endian32(images.data() + 4);
  const uint32_t rows = big_endian32(images.data() + 8);
  const uint32_t cols = big_endian32(images.data() + 12);
  if (rows != kMnistSide || cols != kMnistSide) {
    throw DataError("Fashion-MNIST file " + quoted_path(images_file) + ": images are " +
                    std::to_string(rows) + "x" + std::to_string(cols) +
                    " (byte offset 8), expected 28x28");
  }
  check_size(images_file, images.size(), 16, count, kMnistSide * kMnistSide);

  const std::vector<uint8_t> labels = read_idx_bytes(labels_file);
  check_magic(labels_file, labels, kLabelsMagic, 8);
  const uint32_t label_count = big_endian32(labels.data() + 4);
  check_size(labels_file, labels.size(), 8, label_count, 1);
  if (label_count != count) {
    throw DataError("Fashion-MNIST count mismatch: " + quoted_path(images_file) + " holds " +
                    std::to_string(count) + " images but " + quoted_path(labels_file) + " holds " +
                    std::to_string(label_count) + " labels (byte offset 4)");
  }

  Dataset d;
  d.name = "fashion-mnist";
  d.channels = 1;
  d.height = kPaddedSide;
  d.width = kPaddedSide;
  d.num_classes = kClasses;
  d.labels.resize(count);
  d.images.assign(static_cast<size_t>(count) * kPaddedSide * kPaddedSide, 0);  // zero border
  for (size_t i = 0; i < count; ++i) {
    const uint8_t label = labels[8 + i];
    if (label >= kClasses) {
      throw DataError("Fashion-MNIST file " + quoted_path(labels_file) + ": label " +
                      std::to_string(label) + " of record " + std::to_string(i) +
                      " at byte offset " + std::to_string(8 + i) + " outside [0, 10)");
    }
    d.labels[i] = label;
    const uint8_t* src = images.data() + 16 + i * kMnistSide * kMnistSide;
    uint8_t* dst = d.images.data() + i * kPaddedSide * kPaddedSide;
    for (int64_t y = 0; y < kMnistSide; ++y) {
      std::copy_n(src + y * kMnistSide, kMnistSide, dst + (y + kPad) * kPaddedSide + kPad);
    }
  }
  return d;
}

}  // namespace

TrainTest read_fashion_mnist(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw DataError("Fashion-MNIST directory " + quoted_path(dir) + " not found");
  }
  return {read_split(dir, "train"), read_split(dir, "t10k")};
}

}  // namespace cifar::data
