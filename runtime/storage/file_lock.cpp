#include "storage/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <system_error>

namespace cifar::storage {

FileLock::FileLock(const std::filesystem::path& path) {
  const auto file = path.string() + ".lock";
  fd_ = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw std::system_error(errno, std::generic_category(), "cannot open " + file);
  while (::flock(fd_, LOCK_EX) != 0) {
    if (errno == EINTR) continue;
    const int error = errno;
    ::close(fd_);
    throw std::system_error(error, std::generic_category(), "cannot lock " + file);
  }
}

FileLock::~FileLock() { ::close(fd_); }

}  // namespace cifar::storage
