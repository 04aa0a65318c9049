// The probe that says why a peer is unreachable, on real sockets of this machine: a port with a
// listener accepts, a port bound but not listening refuses, a name that does not resolve is said.
// (Dropped packets need a network namespace of their own: PsFaults in ps_job_test.cpp.)
#include "distributed/ps/peer_probe.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

namespace cifar::ps {
namespace {

using namespace std::chrono_literals;

// A TCP socket bound to a free port of 127.0.0.1, listening or not.
class LocalPort {
 public:
  explicit LocalPort(bool listening) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    auto* raw = reinterpret_cast<sockaddr*>(&address);
    if (fd_ < 0 || ::bind(fd_, raw, length) != 0 || ::getsockname(fd_, raw, &length) != 0 ||
        (listening && ::listen(fd_, 4) != 0)) {
      throw std::runtime_error("no local port");
    }
    port_ = ntohs(address.sin_port);
  }
  LocalPort(const LocalPort&) = delete;
  LocalPort& operator=(const LocalPort&) = delete;
  ~LocalPort() { ::close(fd_); }
  [[nodiscard]] std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  int fd_;
  int port_ = 0;
};

TEST(PeerProbe, APortWithAListenerAccepts) {
  const LocalPort port(/*listening=*/true);
  EXPECT_EQ(probe_peer(port.address(), 3s), PeerAnswer::kAccepted);
  EXPECT_EQ(probe_peer("dns:///" + port.address(), 3s), PeerAnswer::kAccepted);
  EXPECT_EQ(explain_unreachable(port.address(), PeerAnswer::kAccepted, 3s), "");
}

TEST(PeerProbe, APortNobodyListensOnRefusesAndIsSaidSo) {
  const LocalPort port(/*listening=*/false);
  ASSERT_EQ(probe_peer(port.address(), 3s), PeerAnswer::kRefused);
  EXPECT_EQ(explain_unreachable(port.address(), PeerAnswer::kRefused, 3s),
            "nobody listens at " + port.address() + " (the peer is not up yet, or gone)");
}

TEST(PeerProbe, ANameThatDoesNotResolveIsSaidSo) {
  const std::string peer = "no-such-peer.invalid:2222";
  ASSERT_EQ(probe_peer(peer, 3s), PeerAnswer::kUnresolved);
  EXPECT_EQ(explain_unreachable(peer, PeerAnswer::kUnresolved, 3s),
            "no-such-peer.invalid does not resolve (its pod gone, or no DNS)");
}

TEST(PeerProbe, DroppedPacketsAreSaidWithTheWaitAndTheNetworkPolicyThatMayBeWhy) {
  EXPECT_EQ(explain_unreachable("[::1]:2222", PeerAnswer::kNoAnswer, 2500ms),
            "a connection to [::1]:2222 was neither accepted nor refused in 2.5 s: its packets "
            "are dropped on the way; a NetworkPolicy (or a firewall) that drops the job's traffic "
            "may be why");
}

}  // namespace
}  // namespace cifar::ps
