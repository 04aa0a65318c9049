// Download (libcurl), verify (OpenSSL EVP MD5), extract (libarchive). Every intermediate lives
// under a unique temporary name in the target root and is removed on every exit path.
#include "data/download.h"

#include <archive.h>
#include <archive_entry.h>
#include <curl/curl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <stdexcept>
#include <thread>

#include "http/curl_easy.h"

namespace cifar::data {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kOfficialBase = "https://www.cs.toronto.edu/~kriz";

// Removes a temporary file or directory when the scope ends, whatever the way out.
class TempPath {
 public:
  explicit TempPath(fs::path path) : path_(std::move(path)) {}
  ~TempPath() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempPath(const TempPath&) = delete;
  TempPath& operator=(const TempPath&) = delete;
  [[nodiscard]] const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// Unique among processes sharing a volume (pid) and among threads and runs (random).
std::string unique_suffix() {
  static std::mutex mutex;
  static std::mt19937_64 gen{std::random_device{}()};
  std::lock_guard<std::mutex> lock(mutex);
  char buf[48];
  std::snprintf(buf, sizeof buf, "%ld-%016llx", static_cast<long>(::getpid()),
                static_cast<unsigned long long>(gen()));
  return buf;
}

std::string file_name_of(std::string_view url) {
  const auto slash = url.find_last_of('/');
  return std::string(slash == std::string_view::npos ? url : url.substr(slash + 1));
}

// A single relative name: no separators, not "." or "..".
bool is_plain_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos;
}

// ---- download ----

struct FileClose {
  // The unique_ptr's deleter is the owner here.
  // NOLINTNEXTLINE(cppcoreguidelines-owning-memory)
  void operator()(std::FILE* f) const { std::fclose(f); }
};

size_t write_to_file(char* data, size_t size, size_t count, void* user) {
  return std::fwrite(data, size, count, static_cast<std::FILE*>(user)) * size;
}

struct Attempt {
  CURLcode code = CURLE_OK;
  long http_status = 0;
  std::string message;
  [[nodiscard]] bool transient() const {
    // Worth another try: the network or the server hiccuped, not a wrong URL.
    switch (code) {
      case CURLE_COULDNT_CONNECT:
      case CURLE_OPERATION_TIMEDOUT:
      case CURLE_PARTIAL_FILE:
      case CURLE_RECV_ERROR:
      case CURLE_SEND_ERROR:
      case CURLE_GOT_NOTHING:
        return true;
      case CURLE_HTTP_RETURNED_ERROR:
        return http_status >= 500;
      default:
        return false;
    }
  }
};

Attempt fetch_once(const std::string& url, const fs::path& out) {
  std::unique_ptr<std::FILE, FileClose> file(std::fopen(out.c_str(), "wb"));
  if (!file) {
    throw DataError("cannot create download file " + quoted_path(out) + ": " +
                    std::strerror(errno));
  }
  http::CurlEasy curl;
  try {
    curl = http::make_curl_easy();
  } catch (const std::runtime_error& e) {
    throw DataError(e.what());
  }
  char error[CURL_ERROR_SIZE] = {};
  CURL* c = curl.get();
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, write_to_file);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, file.get());
  curl_easy_setopt(c, CURLOPT_FAILONERROR, 1L);
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);  // no SIGALRM-based timeouts in a threaded program
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 30L);
  // Abort a stalled transfer (under 1 KiB/s for a minute) rather than hang a training job.
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1024L);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 60L);
#if LIBCURL_VERSION_NUM >= 0x075500
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https,file");
  curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
#endif
  Attempt a;
  a.code = curl_easy_perform(c);
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &a.http_status);
  a.message = error[0] != '\0' ? error : curl_easy_strerror(a.code);
  if (std::fclose(file.release()) != 0 && a.code == CURLE_OK) {
    a.code = CURLE_WRITE_ERROR;
    a.message = "cannot write " + out.string() + ": " + std::strerror(errno);
  }
  return a;
}

void fetch(const std::string& url, const fs::path& out) {
  constexpr int kAttempts = 3;
  for (int attempt = 1;; ++attempt) {
    const Attempt a = fetch_once(url, out);
    if (a.code == CURLE_OK) return;
    if (!a.transient() || attempt == kAttempts) {
      std::string what = "download of " + url + " failed";
      if (a.code == CURLE_HTTP_RETURNED_ERROR) what += ": HTTP " + std::to_string(a.http_status);
      if (attempt > 1) what += " after " + std::to_string(attempt) + " attempts";
      throw DataError(what + " (" + a.message + ")");
    }
    std::this_thread::sleep_for(std::chrono::seconds(attempt));
  }
}

// ---- extraction ----

struct ReadArchiveFree {
  void operator()(archive* a) const { archive_read_free(a); }
};
struct WriteArchiveFree {
  void operator()(archive* a) const { archive_write_free(a); }
};

// Rejects anything that could land outside the extraction directory (absolute paths, '..'
// components) before libarchive sees it; libarchive's SECURE flags are a second line.
void check_entry_path(const std::string& url, const std::string& name) {
  if (name.empty() || name.front() == '/') {
    throw DataError("archive " + url + ": unsafe entry path \"" + name + "\" (absolute or empty)");
  }
  size_t start = 0;
  while (start <= name.size()) {
    const size_t end = std::min(name.find('/', start), name.size());
    if (name.compare(start, end - start, "..") == 0) {
      throw DataError("archive " + url + ": unsafe entry path \"" + name + "\" (contains '..')");
    }
    start = end + 1;
  }
}

void extract(const std::string& url, const fs::path& archive_file, const fs::path& dest) {
  std::unique_ptr<archive, ReadArchiveFree> in(archive_read_new());
  std::unique_ptr<archive, WriteArchiveFree> out(archive_write_disk_new());
  if (!in || !out) throw DataError("libarchive: out of memory");
  archive_read_support_filter_all(in.get());
  archive_read_support_format_all(in.get());
  // Entries are re-rooted under `dest` (an absolute path; chdir would not be thread-safe), so
  // NOABSOLUTEPATHS cannot be used: check_entry_path() rejects absolute names before that.
  archive_write_disk_set_options(out.get(), ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_SECURE_NODOTDOT |
                                                ARCHIVE_EXTRACT_SECURE_SYMLINKS);
  const auto fail = [&](archive* a, const std::string& what) {
    const char* msg = archive_error_string(a);
    throw DataError("archive " + url + ": " + what + ": " +
                    (msg != nullptr ? msg : "unknown error"));
  };
  if (archive_read_open_filename(in.get(), archive_file.c_str(), 1U << 16U) != ARCHIVE_OK) {
    fail(in.get(), "cannot open " + archive_file.string());
  }
  for (;;) {
    archive_entry* entry = nullptr;
    const int r = archive_read_next_header(in.get(), &entry);
    if (r == ARCHIVE_EOF) break;
    if (r != ARCHIVE_OK && r != ARCHIVE_WARN) fail(in.get(), "cannot read entry header");
    const char* raw_name = archive_entry_pathname(entry);
    const std::string name = raw_name != nullptr ? raw_name : "";
    check_entry_path(url, name);
    const auto type = archive_entry_filetype(entry);
    if ((type != AE_IFREG && type != AE_IFDIR) || archive_entry_hardlink(entry) != nullptr) {
      throw DataError("archive " + url + ": entry \"" + name +
                      "\" is not a regular file or directory (links are not accepted)");
    }
    archive_entry_set_pathname(entry, (dest / name).c_str());
    if (archive_write_header(out.get(), entry) != ARCHIVE_OK)
      fail(out.get(), "cannot extract " + name);
    const void* block = nullptr;
    size_t size = 0;
    la_int64_t offset = 0;
    for (;;) {
      const int d = archive_read_data_block(in.get(), &block, &size, &offset);
      if (d == ARCHIVE_EOF) break;
      if (d != ARCHIVE_OK) fail(in.get(), "corrupt data in " + name);
      if (archive_write_data_block(out.get(), block, size, offset) != ARCHIVE_OK) {
        fail(out.get(), "cannot write " + name);
      }
    }
    if (archive_write_finish_entry(out.get()) != ARCHIVE_OK)
      fail(out.get(), "cannot finish " + name);
  }
  if (archive_write_close(out.get()) != ARCHIVE_OK) fail(out.get(), "cannot close the extraction");
}

// Empty when `dir` holds every expected file, else the first one missing.
std::string first_missing(const fs::path& dir, const ArchiveSpec& spec) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return dir.string();
  for (const auto& f : spec.files) {
    const fs::path p = dir / f;
    if (!fs::is_regular_file(p, ec) || fs::file_size(p, ec) == 0 || ec) return p.string();
  }
  return {};
}

}  // namespace

std::string as_md5(std::string_view text) {
  std::string md5(text);
  std::transform(md5.begin(), md5.end(), md5.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const bool hex =
      md5.size() == 32 && md5.find_first_not_of("0123456789abcdef") == std::string::npos;
  return hex ? md5 : std::string();
}

struct Md5::Context {
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx{EVP_MD_CTX_new(), EVP_MD_CTX_free};
  std::string hex;  // once final
};

Md5::Md5() : context_(std::make_unique<Context>()) {
  if (!context_->ctx || EVP_DigestInit_ex(context_->ctx.get(), EVP_md5(), nullptr) != 1) {
    throw DataError("OpenSSL: MD5 unavailable");
  }
}
Md5::~Md5() = default;

void Md5::update(std::string_view bytes) {
  if (!context_->hex.empty()) throw std::logic_error("Md5::update after hex()");
  if (EVP_DigestUpdate(context_->ctx.get(), bytes.data(), bytes.size()) != 1) {
    throw DataError("OpenSSL: MD5 update failed");
  }
}

void Md5::update_from_file(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in)
    throw DataError("cannot open " + quoted_path(file) + " for its MD5: " + std::strerror(errno));
  std::vector<char> buf(1U << 20U);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    update(std::string_view(buf.data(), static_cast<size_t>(in.gcount())));
  }
  if (in.bad()) throw DataError("read error in " + quoted_path(file) + " while computing its MD5");
}

std::string Md5::hex() {
  auto& hex = context_->hex;
  if (!hex.empty()) return hex;
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(context_->ctx.get(), digest, &len) != 1) {
    throw DataError("OpenSSL: MD5 final failed");
  }
  static constexpr char kHex[] = "0123456789abcdef";
  for (unsigned int i = 0; i < len; ++i) {
    hex += kHex[digest[i] >> 4U];
    hex += kHex[digest[i] & 0xFU];
  }
  return hex;
}

std::string md5_file(const fs::path& file) {
  Md5 md5;
  md5.update_from_file(file);
  return md5.hex();
}

ArchiveSpec official_archive(std::string_view dataset, std::string_view mirror_base_url) {
  ArchiveSpec spec;
  std::string file;
  if (dataset == "cifar10") {
    file = "cifar-10-binary.tar.gz";
    spec.md5 = "c32a1d4ab5d03f1284b67883e8d87530";
    spec.top_dir = "cifar-10-batches-bin";
    spec.files = {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
                  "data_batch_4.bin", "data_batch_5.bin", "test_batch.bin"};
  } else if (dataset == "cifar100") {
    file = "cifar-100-binary.tar.gz";
    spec.md5 = "03b5dce01913d631647c71ecec9e9cb8";
    spec.top_dir = "cifar-100-binary";
    spec.files = {"train.bin", "test.bin"};
  } else {
    throw DataError("no official archive for dataset \"" + std::string(dataset) +
                    "\" (expected cifar10 or cifar100)");
  }
  std::string base(mirror_base_url.empty() ? kOfficialBase : mirror_base_url);
  while (!base.empty() && base.back() == '/') base.pop_back();
  spec.url = base + "/" + file;
  return spec;
}

fs::path download_and_extract(const ArchiveSpec& spec, const fs::path& root) {
  if (!is_plain_name(spec.top_dir)) {
    throw DataError("archive " + spec.url + ": top directory \"" + spec.top_dir +
                    "\" must be a single name");
  }
  for (const auto& f : spec.files) check_entry_path(spec.url, f);
  const std::string expected_md5 = as_md5(spec.md5);
  if (expected_md5.empty()) {
    throw DataError("archive " + spec.url + ": \"" + spec.md5 + "\" is not an MD5 checksum");
  }

  fs::path target = root / spec.top_dir;
  std::error_code ec;
  if (fs::exists(target, ec)) {
    const std::string missing = first_missing(target, spec);
    if (missing.empty()) return target;
    // Not ours to delete: it may hold someone's data. Our own extractions appear atomically.
    throw DataError(quoted_path(target) + " exists but is incomplete (" + quoted_path(missing) +
                    " missing or empty); remove it to download " + spec.url + " again");
  }
  fs::create_directories(root, ec);
  if (ec) throw DataError("cannot create " + quoted_path(root) + ": " + ec.message());

  const std::string suffix = unique_suffix();
  const TempPath archive_file(root / ("." + file_name_of(spec.url) + "." + suffix + ".part"));
  fetch(spec.url, archive_file.path());
  const std::string actual_md5 = md5_file(archive_file.path());
  if (actual_md5 != expected_md5) {
    throw DataError("checksum mismatch for " + spec.url + ": expected md5 " + expected_md5 +
                    ", got " + actual_md5);
  }

  const TempPath staging(root / (".extract-" + spec.top_dir + "." + suffix));
  fs::create_directory(staging.path(), ec);
  if (ec) throw DataError("cannot create " + quoted_path(staging.path()) + ": " + ec.message());
  extract(spec.url, archive_file.path(), staging.path());
  const fs::path extracted = staging.path() / spec.top_dir;
  if (!fs::is_directory(extracted, ec)) {
    throw DataError("archive " + spec.url + " has no top directory " + spec.top_dir);
  }
  if (const std::string missing = first_missing(extracted, spec); !missing.empty()) {
    throw DataError("archive " + spec.url + " lacks " + spec.top_dir + "/" +
                    fs::path(missing).lexically_relative(extracted).string() + " (or it is empty)");
  }
  fs::rename(extracted, target, ec);
  if (ec) {
    // Another process may have won the race with its own complete copy: use it.
    if (first_missing(target, spec).empty()) return target;
    throw DataError("cannot move " + quoted_path(extracted) + " to " + quoted_path(target) + ": " +
                    ec.message());
  }
  return target;
}

}  // namespace cifar::data
