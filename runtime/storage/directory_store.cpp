#include "storage/directory_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <iterator>
#include <system_error>

#include "health/waits.h"
#include "storage/file_lock.h"

namespace cifar::storage {
namespace fs = std::filesystem;
namespace {

[[noreturn]] void throw_errno(int error, const fs::path& path, const char* what) {
  throw std::system_error(error, std::generic_category(), std::string(what) + " " + path.string());
}

// Writes `bytes` to a new file of its own beside `path` (a unique name, as mkstemp makes it: two
// writers of one name never share a temporary file), synced to disk; returns the file's path.
fs::path write_synced_beside(const fs::path& path, std::string_view bytes) {
  auto pattern = (path.parent_path() / ("." + path.filename().string() + ".tmp.XXXXXX")).string();
  const int fd = ::mkostemp(pattern.data(), O_CLOEXEC);
  if (fd < 0) throw_errno(errno, pattern, "cannot create");
  fs::path temp = pattern;  // not const: returned, so moved
  const auto fail = [&](const char* what) {
    const int error = errno;
    ::close(fd);
    std::error_code ignored;
    fs::remove(temp, ignored);  // never a torn file; what was there stays
    throw_errno(error, temp, what);
  };
  if (::fchmod(fd, 0644) != 0) fail("cannot create");
  for (size_t done = 0; done < bytes.size();) {
    const auto n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("cannot write");
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) fail("cannot sync");
  if (::close(fd) != 0) {
    const int error = errno;
    std::error_code ignored;
    fs::remove(temp, ignored);
    throw_errno(error, temp, "cannot write");
  }
  return temp;
}

// fsync a directory, so that a rename in it is durable.
void sync_directory(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

DirectoryStore::DirectoryStore(fs::path dir) : dir_(std::move(dir)) {}

std::string DirectoryStore::location() const { return dir_.string(); }

std::string DirectoryStore::location_of(std::string_view name) const {
  return path_of(name).string();
}

fs::path DirectoryStore::path_of(std::string_view name) const { return dir_ / std::string(name); }

void DirectoryStore::put(std::string_view name, std::string_view bytes) {
  const health::Wait in_flight("write of " + path_of(name).string(), "");
  fs::create_directories(dir_);
  const auto temp = write_synced_beside(path_of(name), bytes);
  try {
    fs::rename(temp, path_of(name));
  } catch (...) {
    std::error_code ignored;
    fs::remove(temp, ignored);
    throw;
  }
  sync_directory(dir_);
}

std::optional<std::string> DirectoryStore::get(std::string_view name) const {
  const health::Wait in_flight("read of " + path_of(name).string(), "");
  std::ifstream in(path_of(name), std::ios::binary);
  if (!in) return std::nullopt;
  std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (in.bad()) throw std::runtime_error("cannot read " + path_of(name).string());
  return bytes;
}

std::vector<std::string> DirectoryStore::list(std::string_view prefix) const {
  std::vector<std::string> names;
  std::error_code error;
  for (fs::directory_iterator it(dir_, error), end; !error && it != end; it.increment(error)) {
    auto name = it->path().filename().string();
    if (name.rfind(prefix, 0) == 0 && name.front() != '.' && it->is_regular_file()) {
      names.push_back(std::move(name));
    }
  }
  if (error && error != std::errc::no_such_file_or_directory) {
    throw std::system_error(error, "cannot list " + dir_.string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

void DirectoryStore::remove(std::string_view name) { fs::remove(path_of(name)); }

std::optional<Versioned> DirectoryStore::get_versioned(std::string_view name) const {
  auto bytes = get(name);
  if (!bytes) return std::nullopt;
  return Versioned{*bytes, *bytes};
}

bool DirectoryStore::put_if(std::string_view name, std::string_view bytes,
                            const std::optional<std::string>& expected) {
  fs::create_directories(dir_);
  const FileLock lock(path_of(name));
  const auto current = get(name);
  if (current != expected) return false;
  put(name, bytes);
  return true;
}

}  // namespace cifar::storage
