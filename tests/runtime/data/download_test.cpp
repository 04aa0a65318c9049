// Download, verify and extract real .tar.gz archives served by a real HTTP server on loopback.
#include "data/download.h"

#include <archive.h>
#include <archive_entry.h>
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "tests/runtime/data/test_util.h"

namespace cifar::data {
namespace {

namespace fs = std::filesystem;
using testing::expect_data_error;
using testing::read_bytes;
using testing::TempDir;

// A minimal HTTP/1.0 file server on 127.0.0.1 with an ephemeral port: GET of a known path gives
// 200 and the bytes, /redirect/<path> gives 302 to /<path>, anything else 404. It can be told to
// fail the next requests with a status, and counts requests.
class HttpServer {
 public:
  HttpServer() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd_ < 0) throw std::runtime_error("socket failed");
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    socklen_t len = sizeof addr;
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), len) != 0 || ::listen(fd_, 16) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      ::close(fd_);
      throw std::runtime_error("bind/listen failed");
    }
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~HttpServer() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
  }
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  void put(const std::string& path, std::vector<uint8_t> body) {
    std::lock_guard<std::mutex> lock(mutex_);
    files_[path] = std::move(body);
  }
  void fail_next(int status, int times) {
    std::lock_guard<std::mutex> lock(mutex_);
    fail_status_ = status;
    fail_times_ = times;
  }
  [[nodiscard]] std::string url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }
  [[nodiscard]] int requests() const { return requests_; }

 private:
  void serve() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;  // wakes up to see stop_
      const int conn = ::accept(fd_, nullptr, nullptr);
      if (conn < 0) continue;
      handle(conn);
      ::close(conn);
    }
  }

  void handle(int conn) {
    std::string request;
    char buf[4096];
    while (request.find("\r\n\r\n") == std::string::npos) {
      const ssize_t n = ::recv(conn, buf, sizeof buf, 0);
      if (n <= 0) return;
      request.append(buf, static_cast<size_t>(n));
    }
    ++requests_;
    const size_t sp1 = request.find(' ');
    const size_t sp2 = request.find(' ', sp1 + 1);
    const std::string path = request.substr(sp1 + 1, sp2 - sp1 - 1);
    std::string head;
    std::vector<uint8_t> body;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (fail_times_ > 0) {
        --fail_times_;
        head = "HTTP/1.0 " + std::to_string(fail_status_) + " Failing\r\nContent-Length: 0\r\n";
      } else if (path.rfind("/redirect/", 0) == 0) {
        head = "HTTP/1.0 302 Found\r\nLocation: " + path.substr(9) + "\r\nContent-Length: 0\r\n";
      } else if (auto it = files_.find(path); it != files_.end()) {
        body = it->second;
        head = "HTTP/1.0 200 OK\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
      } else {
        head = "HTTP/1.0 404 Not Found\r\nContent-Length: 0\r\n";
      }
    }
    head += "Connection: close\r\n\r\n";
    send_all(conn, head.data(), head.size());
    send_all(conn, body.data(), body.size());
  }

  static void send_all(int conn, const void* data, size_t size) {
    const auto* p = static_cast<const char*>(data);
    while (size > 0) {
      const ssize_t n = ::send(conn, p, size, MSG_NOSIGNAL);
      if (n <= 0) return;
      p += n;
      size -= static_cast<size_t>(n);
    }
  }

  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> requests_{0};
  std::mutex mutex_;
  std::map<std::string, std::vector<uint8_t>> files_;
  int fail_status_ = 0;
  int fail_times_ = 0;
  std::thread thread_;
};

struct Entry {
  std::string name;
  std::vector<uint8_t> data;
  enum Kind { kFile, kDir, kSymlink } kind = kFile;
  std::string link_target;
};

// A .tar.gz written by libarchive, entries taken verbatim (including hostile names).
std::vector<uint8_t> make_tar_gz(const std::vector<Entry>& entries) {
  size_t capacity = 1U << 20U;  // headers and gzip overhead
  for (const auto& e : entries) capacity += 2 * e.data.size();
  std::vector<uint8_t> out(capacity);
  size_t used = 0;
  struct WriteFree {
    void operator()(archive* a) const { archive_write_free(a); }
  };
  std::unique_ptr<archive, WriteFree> a(archive_write_new());
  archive_write_add_filter_gzip(a.get());
  archive_write_set_format_pax_restricted(a.get());
  if (archive_write_open_memory(a.get(), out.data(), out.size(), &used) != ARCHIVE_OK) {
    throw std::runtime_error(archive_error_string(a.get()));
  }
  for (const auto& e : entries) {
    archive_entry* entry = archive_entry_new();
    archive_entry_set_pathname(entry, e.name.c_str());
    archive_entry_set_mtime(entry, 1700000000, 0);
    if (e.kind == Entry::kDir) {
      archive_entry_set_filetype(entry, AE_IFDIR);
      archive_entry_set_perm(entry, 0755);
    } else if (e.kind == Entry::kSymlink) {
      archive_entry_set_filetype(entry, AE_IFLNK);
      archive_entry_set_symlink(entry, e.link_target.c_str());
      archive_entry_set_perm(entry, 0777);
    } else {
      archive_entry_set_filetype(entry, AE_IFREG);
      archive_entry_set_perm(entry, 0644);
      archive_entry_set_size(entry, static_cast<la_int64_t>(e.data.size()));
    }
    archive_write_header(a.get(), entry);
    if (!e.data.empty()) archive_write_data(a.get(), e.data.data(), e.data.size());
    archive_entry_free(entry);
  }
  archive_write_close(a.get());
  out.resize(used);
  return out;
}

constexpr const char* kTop = "cifar-10-batches-bin";

// Small synthetic CIFAR-10 files as archive entries under kTop/.
std::vector<Entry> cifar_entries(const fs::path& scratch) {
  SyntheticOptions o;
  o.train_size = 25;
  o.test_size = 5;
  write_synthetic_cifar10(scratch, o);
  std::vector<Entry> entries{{std::string(kTop) + "/", {}, Entry::kDir, ""}};
  for (const auto& f : official_archive("cifar10").files) {
    entries.push_back({std::string(kTop) + "/" + f, read_bytes(scratch / f), Entry::kFile, ""});
  }
  entries.push_back({std::string(kTop) + "/batches.meta.txt", {'a', '\n'}, Entry::kFile, ""});
  return entries;
}

ArchiveSpec spec_for(const std::string& url, const fs::path& archive_file) {
  ArchiveSpec spec = official_archive("cifar10");
  spec.url = url;
  spec.md5 = md5_file(archive_file);
  return spec;
}

std::vector<std::string> listing(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

class Download : public ::testing::Test {
 protected:
  void SetUp() override {
    archive_ = make_tar_gz(cifar_entries(scratch_ / "src"));
    testing::write_bytes(scratch_ / "cifar.tar.gz", archive_);
    server_.put("/d/cifar-10-binary.tar.gz", archive_);
  }
  ArchiveSpec good_spec() {
    return spec_for(server_.url("/d/cifar-10-binary.tar.gz"), scratch_ / "cifar.tar.gz");
  }
  // Serves `entries` as /d/bad.tar.gz and returns a spec with its correct checksum.
  ArchiveSpec serve(const std::vector<Entry>& entries) {
    const auto bytes = make_tar_gz(entries);
    testing::write_bytes(scratch_ / "bad.tar.gz", bytes);
    server_.put("/d/bad.tar.gz", bytes);
    return spec_for(server_.url("/d/bad.tar.gz"), scratch_ / "bad.tar.gz");
  }

  TempDir scratch_;
  TempDir root_;
  HttpServer server_;
  std::vector<uint8_t> archive_;
};

TEST_F(Download, DownloadsVerifiesExtractsAndReads) {
  const fs::path dir = download_and_extract(good_spec(), root_.path());
  EXPECT_EQ(dir, root_ / kTop);
  EXPECT_EQ(listing(root_.path()), std::vector<std::string>{kTop});  // no temporaries left
  const TrainTest tt = read_cifar10(root_.path());
  EXPECT_EQ(tt.train.size(), 25);
  EXPECT_EQ(tt.test.size(), 5);
  EXPECT_EQ(read_bytes(dir / "data_batch_2.bin"),
            read_bytes(scratch_ / "src" / "data_batch_2.bin"));
  EXPECT_EQ(server_.requests(), 1);

  // Complete already: no second download.
  EXPECT_EQ(download_and_extract(good_spec(), root_.path()), dir);
  EXPECT_EQ(server_.requests(), 1);
}

TEST_F(Download, FollowsRedirects) {
  const fs::path dir = download_and_extract(
      spec_for(server_.url("/redirect/d/cifar-10-binary.tar.gz"), scratch_ / "cifar.tar.gz"),
      root_ / "nested" / "root");
  EXPECT_TRUE(fs::exists(dir / "test_batch.bin"));
  EXPECT_EQ(server_.requests(), 2);
}

TEST_F(Download, RetriesServerErrors) {
  server_.fail_next(503, 1);
  download_and_extract(good_spec(), root_.path());
  EXPECT_TRUE(fs::exists(root_ / kTop / "data_batch_1.bin"));
  EXPECT_EQ(server_.requests(), 2);
}

TEST_F(Download, FileUrlForMountedMirrors) {
  const ArchiveSpec spec = official_archive("cifar10", "file://" + scratch_.path().string());
  fs::copy_file(scratch_ / "cifar.tar.gz", scratch_ / "cifar-10-binary.tar.gz");
  ArchiveSpec with_md5 = spec;
  with_md5.md5 = md5_file(scratch_ / "cifar.tar.gz");
  EXPECT_TRUE(fs::exists(download_and_extract(with_md5, root_.path()) / "data_batch_5.bin"));
}

TEST_F(Download, ChecksumMismatchNamesUrlAndBothSumsAndLeavesNothing) {
  ArchiveSpec spec = good_spec();
  const std::string actual = spec.md5;
  spec.md5 = "00000000000000000000000000000000";
  expect_data_error([&] { download_and_extract(spec, root_.path()); },
                    {spec.url, "checksum mismatch", "expected md5 " + spec.md5, actual});
  EXPECT_TRUE(listing(root_.path()).empty());
}

TEST_F(Download, NotFoundFailsWithTheStatusAndLeavesNothing) {
  ArchiveSpec spec = good_spec();
  spec.url = server_.url("/d/missing.tar.gz");
  expect_data_error([&] { download_and_extract(spec, root_.path()); }, {spec.url, "HTTP 404"});
  EXPECT_TRUE(listing(root_.path()).empty());
  EXPECT_EQ(server_.requests(), 1);  // a 404 is not retried
}

TEST_F(Download, RejectsDotDotEntries) {
  auto entries = cifar_entries(scratch_ / "src2");
  entries.push_back({std::string(kTop) + "/../../escaped.bin", {'x'}, Entry::kFile, ""});
  const ArchiveSpec spec = serve(entries);
  expect_data_error([&] { download_and_extract(spec, root_.path()); }, {spec.url, "'..'"});
  EXPECT_TRUE(listing(root_.path()).empty());
  EXPECT_FALSE(fs::exists(root_.path().parent_path() / "escaped.bin"));
}

TEST_F(Download, RejectsAbsoluteEntries) {
  auto entries = cifar_entries(scratch_ / "src2");
  const fs::path target = scratch_ / "absolute.bin";
  entries.insert(entries.begin(), {target.string(), {'x'}, Entry::kFile, ""});
  const ArchiveSpec spec = serve(entries);
  expect_data_error([&] { download_and_extract(spec, root_.path()); }, {spec.url, "absolute"});
  EXPECT_TRUE(listing(root_.path()).empty());
  EXPECT_FALSE(fs::exists(target));
}

TEST_F(Download, RejectsLinks) {
  auto entries = cifar_entries(scratch_ / "src2");
  entries.push_back({std::string(kTop) + "/link", {}, Entry::kSymlink, "/etc/passwd"});
  const ArchiveSpec spec = serve(entries);
  expect_data_error([&] { download_and_extract(spec, root_.path()); }, {spec.url, "link"});
  EXPECT_TRUE(listing(root_.path()).empty());
}

TEST_F(Download, IncompleteArchiveIsRejected) {
  auto entries = cifar_entries(scratch_ / "src2");
  entries.erase(
      std::remove_if(entries.begin(), entries.end(),
                     [](const Entry& e) { return e.name.find("test_batch") != std::string::npos; }),
      entries.end());
  const ArchiveSpec spec = serve(entries);
  expect_data_error([&] { download_and_extract(spec, root_.path()); },
                    {spec.url, std::string(kTop) + "/test_batch.bin"});
  EXPECT_TRUE(listing(root_.path()).empty());
}

TEST_F(Download, CorruptArchiveWithMatchingChecksum) {
  std::vector<uint8_t> junk(5000, 0x5A);
  testing::write_bytes(scratch_ / "junk.tar.gz", junk);
  server_.put("/d/junk.tar.gz", junk);
  const ArchiveSpec spec = spec_for(server_.url("/d/junk.tar.gz"), scratch_ / "junk.tar.gz");
  expect_data_error([&] { download_and_extract(spec, root_.path()); }, {spec.url});
  EXPECT_TRUE(listing(root_.path()).empty());
}

TEST_F(Download, ExistingIncompleteDirectoryIsLeftAloneAndReported) {
  fs::create_directories(root_ / kTop);
  testing::write_bytes(root_ / kTop / "data_batch_1.bin", {1, 2, 3});
  expect_data_error([&] { download_and_extract(good_spec(), root_.path()); },
                    {(root_ / kTop).string(), "incomplete", "data_batch_2.bin"});
  EXPECT_EQ(server_.requests(), 0);
  EXPECT_TRUE(fs::exists(root_ / kTop / "data_batch_1.bin"));
}

TEST_F(Download, RejectsMalformedSpecs) {
  ArchiveSpec spec = good_spec();
  spec.md5 = "not-an-md5";
  expect_data_error([&] { download_and_extract(spec, root_.path()); }, {"not an MD5"});
  spec = good_spec();
  spec.top_dir = "../up";
  expect_data_error([&] { download_and_extract(spec, root_.path()); }, {"single name"});
  EXPECT_EQ(server_.requests(), 0);
}

TEST(OfficialArchive, UrlsChecksumsAndMirrors) {
  const ArchiveSpec c10 = official_archive("cifar10");
  EXPECT_EQ(c10.url, "https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz");
  EXPECT_EQ(c10.md5, "c32a1d4ab5d03f1284b67883e8d87530");
  EXPECT_EQ(c10.top_dir, "cifar-10-batches-bin");
  EXPECT_EQ(c10.files.size(), 6U);
  const ArchiveSpec c100 = official_archive("cifar100");
  EXPECT_EQ(c100.url, "https://www.cs.toronto.edu/~kriz/cifar-100-binary.tar.gz");
  EXPECT_EQ(c100.md5, "03b5dce01913d631647c71ecec9e9cb8");
  EXPECT_EQ(c100.top_dir, "cifar-100-binary");
  EXPECT_EQ(official_archive("cifar100", "http://mirror.local/data/").url,
            "http://mirror.local/data/cifar-100-binary.tar.gz");
  EXPECT_EQ(official_archive("cifar10", "http://mirror.local/data").md5, c10.md5);
  expect_data_error([] { official_archive("imagenet"); }, {"imagenet", "cifar10"});
}

TEST(Md5, KnownDigests) {
  TempDir tmp;
  testing::write_bytes(tmp / "abc", {'a', 'b', 'c'});
  testing::write_bytes(tmp / "empty", {});
  EXPECT_EQ(md5_file(tmp / "abc"), "900150983cd24fb0d6963f7d28e17f72");
  EXPECT_EQ(md5_file(tmp / "empty"), "d41d8cd98f00b204e9800998ecf8427e");
  expect_data_error([&] { md5_file(tmp / "nope"); }, {(tmp / "nope").string()});
}

}  // namespace
}  // namespace cifar::data
