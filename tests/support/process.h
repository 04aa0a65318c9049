// Test support: run real child processes (the cifar-train binary) and talk HTTP to them.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

namespace cifar::testing {

struct ProcessResult {
  int exit_code = -1;  // -signal when killed by a signal
  std::string output;  // stdout and stderr, interleaved
};

// Runs `argv` to completion, capturing its output (argv[0] without a slash is looked up in PATH).
ProcessResult run_process(const std::vector<std::string>& argv);

// A child process with its output going to a file; killed (SIGKILL) if still running on
// destruction so that a failing test never leaves processes behind.
class ChildProcess {
 public:
  ChildProcess(const std::vector<std::string>& argv, const std::filesystem::path& log_file);
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  void kill_hard();       // SIGKILL, then reap
  void send(int signal);  // e.g. SIGTERM for a graceful stop; wait() reaps
  int wait();             // exit code, -signal when killed
  [[nodiscard]] bool running();
  [[nodiscard]] pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int status_ = -1;
  bool reaped_ = false;
};

// A fresh temporary directory, removed on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// A TCP port on 127.0.0.1 that was free a moment ago.
int free_port();
// The first of `count` consecutive ports on 127.0.0.1 that were free a moment ago.
int free_port_range(int count);

// HTTP GET over loopback; returns the body, empty on any failure.
std::string http_get(const std::string& url);

// Polls `predicate` every `every` until it holds or `timeout` passes.
template <typename Predicate>
bool wait_for(Predicate predicate, std::chrono::milliseconds timeout,
              std::chrono::milliseconds every = std::chrono::milliseconds(50)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (predicate()) return true;
    std::this_thread::sleep_for(every);
  }
  return predicate();
}

std::string read_file(const std::filesystem::path& path);

}  // namespace cifar::testing
