// Fetching the official dataset archives: download, verify the MD5, extract safely, atomically.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "data/dataset.h"

namespace cifar::data {

struct ArchiveSpec {
  std::string url;      // http(s):// or file:// (a mounted mirror)
  std::string md5;      // hex MD5 of the archive; required
  std::string top_dir;  // the single directory the archive extracts to, e.g. cifar-10-batches-bin
  // Files under top_dir that make an extraction complete; empty: the directory alone suffices.
  std::vector<std::string> files;
};

// The official archive of "cifar10" or "cifar100" (DataError otherwise). A non-empty
// `mirror_base_url` replaces the URL's directory (air-gapped clusters): the archive's file name is
// appended to it, e.g. "http://mirror.local/datasets" -> ".../datasets/cifar-10-binary.tar.gz".
ArchiveSpec official_archive(std::string_view dataset, std::string_view mirror_base_url = "");

// Returns root/top_dir, downloading and extracting the archive first unless a complete copy is
// already there. The download goes to a temporary file in `root` (HTTP errors fail, redirects are
// followed), is checked against the MD5, then extracted into a temporary directory in `root`
// (absolute paths, '..' and links are rejected) whose top_dir is renamed into place, so a
// concurrent or interrupted run never leaves a partial directory under the real name. Throws
// DataError (naming the URL) on download failure or checksum mismatch, leaving nothing behind; and
// when root/top_dir exists but is incomplete, which it leaves for a person to look at.
std::filesystem::path download_and_extract(const ArchiveSpec& spec,
                                           const std::filesystem::path& root);

// An MD5 computed as the bytes arrive (a fetch hashes each range while the next ones are in flight,
// instead of reading the whole file again at the end).
class Md5 {
 public:
  Md5();
  ~Md5();
  Md5(const Md5&) = delete;
  Md5& operator=(const Md5&) = delete;
  void update(std::string_view bytes);
  // The bytes of `file`, all of them.
  void update_from_file(const std::filesystem::path& file);
  // Lowercase hex; the digest is final after the first call (update() then throws).
  std::string hex();

 private:
  struct Context;
  std::unique_ptr<Context> context_;
};

// Lowercase hex MD5 of a file (DataError if it cannot be read).
std::string md5_file(const std::filesystem::path& file);
// `text` as a lowercase hex MD5, as md5_file writes one; "" if it is none (32 hex digits).
std::string as_md5(std::string_view text);

}  // namespace cifar::data
