// Why a peer that gRPC could not reach is unreachable, found with a plain TCP connection of our
// own: gRPC words one fault differently by timing ("refused", "handshaker shutdown", "reset by
// peer"), the kernel's answer to a connect does not.
#pragma once

#include <chrono>
#include <string>

namespace cifar::ps {

enum class PeerAnswer {
  kAccepted,    // something listens there: the fault is above TCP (TLS, the PS itself)
  kRefused,     // nobody listens: the peer is not up yet, or gone
  kNoAnswer,    // neither accepted nor refused in time: its packets are dropped on the way
  kNoRoute,     // the network says it cannot get there
  kUnresolved,  // the name does not resolve
};

// Connects to `host_port` ("host:port", "[v6]:port", optionally behind gRPC's "dns:///"), waiting
// at most `timeout` for the connection, and closes it at once.
PeerAnswer probe_peer(const std::string& host_port, std::chrono::milliseconds timeout);

// What `answer` says about the peer at `host_port`, for a message that gives up on it ("" where it
// adds nothing).
std::string explain_unreachable(const std::string& host_port, PeerAnswer answer,
                                std::chrono::milliseconds timeout);

}  // namespace cifar::ps
