#include "tests/support/flaky_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <stdexcept>

namespace cifar::testing {
namespace {

sockaddr_in loopback(int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  return addr;
}

void send_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const auto n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n <= 0) return;
    data.remove_prefix(static_cast<size_t>(n));
  }
}

}  // namespace

FlakyProxy::FlakyProxy(int target_port, int failures, std::string status_line, std::string s3_code)
    : target_port_(target_port),
      failures_(failures),
      status_line_(std::move(status_line)),
      s3_code_(std::move(s3_code)),
      listener_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
  auto addr = loopback(0);
  socklen_t size = sizeof addr;
  if (listener_ < 0 || ::bind(listener_, reinterpret_cast<sockaddr*>(&addr), size) != 0 ||
      ::listen(listener_, 16) != 0 ||
      ::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &size) != 0) {
    if (listener_ >= 0) ::close(listener_);
    throw std::runtime_error("FlakyProxy: cannot listen on 127.0.0.1");
  }
  port_ = ntohs(addr.sin_port);
  thread_ = std::thread([this] { serve(); });
}

FlakyProxy::~FlakyProxy() {
  stop_ = true;
  thread_.join();
  ::close(listener_);
}

void FlakyProxy::serve() {
  while (!stop_) {
    pollfd ready{listener_, POLLIN, 0};
    if (::poll(&ready, 1, 20) <= 0) continue;  // wakes up to see stop_
    const int connection = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
    if (connection < 0) continue;
    // Counted before the answer goes out: a client that has read it may look at once.
    if (failed_ < failures_) {
      fail(connection);
    } else {
      ++relayed_;
      relay(connection);
    }
    ::close(connection);
  }
}

// Reads the request's head, answers the error with S3's XML body, and closes.
void FlakyProxy::fail(int connection) {
  std::string head;
  std::array<char, 4096> buffer{};
  while (head.find("\r\n\r\n") == std::string::npos) {
    pollfd ready{connection, POLLIN, 0};
    if (::poll(&ready, 1, 5000) <= 0) return;
    const auto n = ::recv(connection, buffer.data(), buffer.size(), 0);
    if (n <= 0) return;
    head.append(buffer.data(), static_cast<size_t>(n));
  }
  ++failed_;
  const std::string body = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>" + s3_code_ +
                           "</Code><Message>injected by the test</Message></Error>";
  send_all(connection, "HTTP/1.1 " + status_line_ +
                           "\r\nContent-Type: application/xml\r\nContent-Length: " +
                           std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body);
  ::shutdown(connection, SHUT_WR);
}

// Copies bytes both ways until both sides have closed.
void FlakyProxy::relay(int connection) const {
  const int server = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  auto addr = loopback(target_port_);
  if (server < 0 || ::connect(server, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    if (server >= 0) ::close(server);
    return;
  }
  std::array<pollfd, 2> fds{pollfd{connection, POLLIN, 0}, pollfd{server, POLLIN, 0}};
  std::array<bool, 2> open{true, true};
  std::array<char, 65536> buffer{};
  while ((open[0] || open[1]) && !stop_) {
    for (size_t i = 0; i < 2; ++i) fds[i].events = open[i] ? POLLIN : 0;
    if (::poll(fds.data(), 2, 100) <= 0) continue;
    for (size_t i = 0; i < 2; ++i) {
      if (!open[i] || (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      const auto n = ::recv(fds[i].fd, buffer.data(), buffer.size(), 0);
      const int other = fds[1 - i].fd;
      if (n <= 0) {
        open[i] = false;
        ::shutdown(other, SHUT_WR);
      } else {
        send_all(other, std::string_view(buffer.data(), static_cast<size_t>(n)));
      }
    }
  }
  ::close(server);
}

}  // namespace cifar::testing
