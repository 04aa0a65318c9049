#include "bench/support/loopback_tcp.h"

#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

namespace cifar::bench {

Listener::Listener(int backlog) {
  fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  addr_.sin_family = AF_INET;
  addr_.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr_);
  if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&addr_), sizeof(addr_)) != 0 ||
      ::listen(fd_, backlog) != 0 ||
      ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr_), &len) != 0) {
    throw std::runtime_error("cannot listen on loopback");
  }
}

Listener::~Listener() { ::close(fd_); }

int Listener::accept() const {
  const int fd = ::accept(fd_, nullptr, nullptr);
  if (fd < 0) throw std::runtime_error("accept failed");
  return fd;
}

int Listener::connect() const {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0 || ::connect(fd, reinterpret_cast<const sockaddr*>(&addr_), sizeof(addr_)) != 0) {
    throw std::runtime_error("cannot connect on loopback");
  }
  return fd;
}

void send_all(int fd, const char* data, size_t n) {
  while (n > 0) {
    const auto sent = ::send(fd, data, n, 0);
    if (sent <= 0) throw std::runtime_error("send failed");
    data += sent;
    n -= static_cast<size_t>(sent);
  }
}

void receive_all(int fd, char* data, size_t n) {
  while (n > 0) {
    const auto received = ::recv(fd, data, n, 0);
    if (received <= 0) throw std::runtime_error("receive failed");
    data += received;
    n -= static_cast<size_t>(received);
  }
}

namespace {
constexpr int64_t kChunk = 4 << 20;
}  // namespace

double tcp_stream_bandwidth(int64_t bytes, bool both_directions) {
  const Listener listener(1);
  const int a = listener.connect();
  const int b = listener.accept();
  auto send_stream = [bytes](int fd) {
    const std::vector<char> buffer(kChunk, 1);
    for (int64_t sent = 0; sent < bytes;) {
      const auto n = std::min(kChunk, bytes - sent);
      send_all(fd, buffer.data(), static_cast<size_t>(n));
      sent += n;
    }
  };
  auto receive_stream = [bytes](int fd) {
    std::vector<char> buffer(kChunk);
    for (int64_t received = 0; received < bytes;) {
      const auto n = ::recv(fd, buffer.data(), buffer.size(), 0);
      if (n <= 0) throw std::runtime_error("receive failed");
      received += n;
    }
  };
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  threads.emplace_back(send_stream, a);
  threads.emplace_back(receive_stream, b);
  if (both_directions) {
    threads.emplace_back(send_stream, b);
    threads.emplace_back(receive_stream, a);
  }
  for (auto& t : threads) t.join();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ::close(a);
  ::close(b);
  return static_cast<double>(bytes) / seconds;
}

double median_tcp_stream_bandwidth(int64_t bytes, bool both_directions) {
  std::array<double, 3> runs{};
  for (auto& run : runs) run = tcp_stream_bandwidth(bytes, both_directions);
  std::sort(runs.begin(), runs.end());
  return runs[1];
}

}  // namespace cifar::bench
