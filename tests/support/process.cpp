#include "tests/support/process.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <stdexcept>
#include <system_error>

namespace cifar::testing {
namespace {

std::vector<char*> c_argv(const std::vector<std::string>& argv) {
  std::vector<char*> out;
  out.reserve(argv.size() + 1);
  for (const auto& a : argv) out.push_back(const_cast<char*>(a.c_str()));
  out.push_back(nullptr);
  return out;
}

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return -WTERMSIG(status);
  return -1;
}

// Spawns argv with stdout and stderr both on `fd`.
pid_t spawn_with_output(const std::vector<std::string>& argv, int fd) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fd, STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, fd, STDERR_FILENO);
  pid_t pid = -1;
  auto args = c_argv(argv);
  const int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::system_error(rc, std::generic_category(), "posix_spawnp " + argv[0]);
  return pid;
}

size_t append_body(char* data, size_t size, size_t count, void* out) {
  static_cast<std::string*>(out)->append(data, size * count);
  return size * count;
}

}  // namespace

ProcessResult run_process(const std::vector<std::string>& argv) {
  std::array<int, 2> pipe_fds{};
  // Close-on-exec: only the child's stdout and stderr (dup2 clears the flag) may hold the write
  // end, not daemons it leaves behind, or reading to EOF would wait for them.
  if (::pipe2(pipe_fds.data(), O_CLOEXEC) != 0) {
    throw std::system_error(errno, std::generic_category(), "pipe");
  }
  const pid_t pid = spawn_with_output(argv, pipe_fds[1]);
  ::close(pipe_fds[1]);
  ProcessResult result;
  std::array<char, 4096> buffer{};
  ssize_t n = 0;
  while ((n = ::read(pipe_fds[0], buffer.data(), buffer.size())) > 0) {
    result.output.append(buffer.data(), static_cast<size_t>(n));
  }
  ::close(pipe_fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  result.exit_code = exit_code_of(status);
  return result;
}

ChildProcess::ChildProcess(const std::vector<std::string>& argv,
                           const std::filesystem::path& log_file) {
  const int fd = ::open(log_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), log_file.string());
  pid_ = spawn_with_output(argv, fd);
  ::close(fd);
}

ChildProcess::~ChildProcess() {
  if (!reaped_) kill_hard();
}

void ChildProcess::kill_hard() {
  if (reaped_) return;
  ::kill(pid_, SIGKILL);
  wait();
}

void ChildProcess::send(int signal) {
  if (!reaped_) ::kill(pid_, signal);
}

int ChildProcess::wait() {
  if (!reaped_) {
    ::waitpid(pid_, &status_, 0);
    reaped_ = true;
  }
  return exit_code_of(status_);
}

bool ChildProcess::running() {
  if (reaped_) return false;
  if (::waitpid(pid_, &status_, WNOHANG) == pid_) reaped_ = true;
  return !reaped_;
}

TempDir::TempDir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "cifartrain-test-XXXXXX");
  if (::mkdtemp(pattern.data()) == nullptr) {
    throw std::system_error(errno, std::generic_category(), "mkdtemp");
  }
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

namespace {

bool can_bind(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return ok;
}

}  // namespace

// Ranges are drawn below the kernel's ephemeral range (ip_local_port_range, 32768 up here):
// ports in it are handed to outgoing connections, and with a job's processes starting over a few
// seconds beside a cluster's, one of them took a PS's port between this check and its bind.
int free_port_range(int count) {
  constexpr int kLowest = 10000;
  constexpr int kBelowEphemeral = 32768;
  std::mt19937 random(
      static_cast<unsigned>(::getpid()) ^
      static_cast<unsigned>(std::chrono::steady_clock::now().time_since_epoch().count()));
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const int base = kLowest + static_cast<int>(random() % (kBelowEphemeral - kLowest - count));
    bool all = true;
    for (int p = base; p < base + count && all; ++p) all = can_bind(p);
    if (all) return base;
  }
  throw std::runtime_error("no range of " + std::to_string(count) + " free ports");
}

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    throw std::system_error(errno, std::generic_category(), "free_port");
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

std::string http_get(const std::string& url) {
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> curl(curl_easy_init(), curl_easy_cleanup);
  if (!curl) return {};
  std::string body;
  curl_easy_setopt(curl.get(), CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl.get(), CURLOPT_WRITEFUNCTION, append_body);
  curl_easy_setopt(curl.get(), CURLOPT_WRITEDATA, &body);
  curl_easy_setopt(curl.get(), CURLOPT_TIMEOUT, 5L);
  curl_easy_setopt(curl.get(), CURLOPT_FAILONERROR, 1L);
  if (curl_easy_perform(curl.get()) != CURLE_OK) return {};
  return body;
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

}  // namespace cifar::testing
