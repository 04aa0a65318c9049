// An exclusive flock on <path>.lock, held while the object lives: writers of one directory (a
// read-compare-write of a directory store, processes fetching one dataset) take turns.
#pragma once

#include <filesystem>

namespace cifar::storage {

class FileLock {
 public:
  // Waits for the lock; throws std::system_error naming the lock file if it cannot take it.
  explicit FileLock(const std::filesystem::path& path);
  ~FileLock();  // releases the lock
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  FileLock(FileLock&&) = delete;
  FileLock& operator=(FileLock&&) = delete;

 private:
  int fd_;
};

}  // namespace cifar::storage
