// Helpers shared by the data tests: scratch directories and small hand-made datasets.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "data/dataset.h"

namespace cifar::data::testing {

// A fresh directory under the system temp dir, removed with everything in it at scope end.
class TempDir {
 public:
  TempDir() {
    std::string templ =
        (std::filesystem::temp_directory_path() / "cifar-data-test-XXXXXX").string();
    if (::mkdtemp(templ.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = templ;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

inline void write_bytes(const std::filesystem::path& file, const std::vector<uint8_t>& bytes) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << file;
}

inline std::vector<uint8_t> read_bytes(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// n images of shape c x h x w whose bytes are value(i, k) (k indexes within the image), with
// labels i % classes.
inline Dataset make_dataset(int64_t n, int64_t c = 3, int64_t h = 32, int64_t w = 32,
                            int64_t classes = 10,
                            const std::function<uint8_t(int64_t, int64_t)>& value = {}) {
  Dataset d;
  d.name = "test";
  d.channels = c;
  d.height = h;
  d.width = w;
  d.num_classes = classes;
  d.labels.resize(static_cast<size_t>(n));
  d.images.resize(static_cast<size_t>(n * c * h * w));
  for (int64_t i = 0; i < n; ++i) {
    d.labels[static_cast<size_t>(i)] = static_cast<int32_t>(i % classes);
    for (int64_t k = 0; k < c * h * w; ++k) {
      d.images[static_cast<size_t>(i * c * h * w + k)] =
          value ? value(i, k) : static_cast<uint8_t>((i * 131 + k * 7 + (k >> 5U) * 3) & 0xFFU);
    }
  }
  return d;
}

// Runs `f`, expecting a DataError whose message contains every one of `parts`.
template <typename F>
void expect_data_error(F&& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no DataError thrown";
  } catch (const DataError& e) {
    const std::string what = e.what();
    for (const auto& p : parts) {
      EXPECT_NE(what.find(p), std::string::npos)
          << "message \"" << what << "\" lacks \"" << p << "\"";
    }
  }
}

}  // namespace cifar::data::testing
