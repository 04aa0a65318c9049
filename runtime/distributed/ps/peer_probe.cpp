#include "distributed/ps/peer_probe.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <memory>

namespace cifar::ps {
namespace {

struct HostPort {
  std::string host;
  std::string port;
};

HostPort split(std::string address) {
  if (const auto scheme = address.find(":///"); scheme != std::string::npos) {
    address.erase(0, scheme + 4);
  }
  const auto colon = address.rfind(':');
  if (colon == std::string::npos) return {address, ""};
  auto host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return {host, address.substr(colon + 1)};
}

class Socket {
 public:
  explicit Socket(int fd) : fd_(fd) {}
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket() {
    if (fd_ >= 0) ::close(fd_);
  }
  [[nodiscard]] int fd() const { return fd_; }

 private:
  int fd_;
};

// One address's answer: 0 (connected), an errno, or ETIMEDOUT when `timeout` passed first.
int connect_within(const addrinfo& address, std::chrono::milliseconds timeout) {
  const Socket socket(
      ::socket(address.ai_family, address.ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (socket.fd() < 0) return errno;
  if (::connect(socket.fd(), address.ai_addr, address.ai_addrlen) == 0) return 0;
  if (errno != EINPROGRESS) return errno;
  pollfd waiting{socket.fd(), POLLOUT, 0};
  // poll() is not restarted after a signal handler (a stall report's, health/thread_stacks.h).
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int ready = 0;
  do {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    ready = ::poll(&waiting, 1, static_cast<int>(std::max<int64_t>(0, left.count())));
  } while (ready < 0 && errno == EINTR);
  if (ready == 0) return ETIMEDOUT;
  if (ready < 0) return errno;
  int error = 0;
  socklen_t length = sizeof(error);
  if (::getsockopt(socket.fd(), SOL_SOCKET, SO_ERROR, &error, &length) != 0) return errno;
  return error;
}

}  // namespace

PeerAnswer probe_peer(const std::string& host_port, std::chrono::milliseconds timeout) {
  const auto [host, port] = split(host_port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0 || found == nullptr) {
    return PeerAnswer::kUnresolved;
  }
  const std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> addresses(found, &::freeaddrinfo);
  // The first address's answer (gRPC tries them in that order too).
  switch (connect_within(*addresses, timeout)) {
    case 0:
      return PeerAnswer::kAccepted;
    case ECONNREFUSED:
      return PeerAnswer::kRefused;
    case EHOSTUNREACH:
    case ENETUNREACH:
      return PeerAnswer::kNoRoute;
    default:
      return PeerAnswer::kNoAnswer;
  }
}

std::string explain_unreachable(const std::string& host_port, PeerAnswer answer,
                                std::chrono::milliseconds timeout) {
  const auto [host, port] = split(host_port);
  switch (answer) {
    case PeerAnswer::kAccepted:
      return "";
    case PeerAnswer::kRefused:
      return "nobody listens at " + host_port + " (the peer is not up yet, or gone)";
    case PeerAnswer::kNoRoute:
      return "no route to " + host_port;
    case PeerAnswer::kUnresolved:
      return host + " does not resolve (its pod gone, or no DNS)";
    case PeerAnswer::kNoAnswer:
      return "a connection to " + host_port + " was neither accepted nor refused in " +
             fmt::format("{:g}", std::chrono::duration<double>(timeout).count()) +
             " s: its packets are dropped on the way; a NetworkPolicy (or a firewall) that "
             "drops the job's traffic may be why";
  }
  return "";
}

}  // namespace cifar::ps
