// What the two gRPC ends of the parameter server agree on beyond ps.proto: the metadata naming a
// call's stripe, and how a shard's answer becomes a gRPC status and is recognised again.
#pragma once

#include <grpcpp/support/status.h>

#include <string>
#include <utility>
#include <vector>

#include "distributed/ps/shard_status.h"

namespace cifar::ps {

// The metadata key naming the stripe (layout.h) a call is for: "0", "1", ...; none means 0.
constexpr const char* kStripeMetadata = "cifar-ps-stripe";
// The metadata key naming the calling trainer and its incarnation, "<rank>@<incarnation>"
// (membership.h); none: a trainer without an incarnation, served as always.
constexpr const char* kMemberMetadata = "cifar-member";
// The metadata key naming the incarnation a trainer expects of the PS it calls, at least
// (membership.h); none: any.
constexpr const char* kPsIncarnationMetadata = "cifar-ps-incarnation";

// gRPC channel settings for messages of many megabytes, on both ends of a connection.
std::vector<std::pair<std::string, int>> large_message_channel_args();

// Keepalive: a trainer pings each shard's connection every kKeepaliveSeconds and drops it when a
// ping goes unanswered kKeepaliveTimeoutSeconds, so a call in flight to a PS whose machine died
// (no FIN, no RST ever comes) fails within seconds and is retried against its replacement,
// instead of waiting out the call's deadline. The server must allow pings that come without
// data (a sync push can wait at the shard for the other trainers).
inline constexpr int kKeepaliveSeconds = 10;
inline constexpr int kKeepaliveTimeoutSeconds = 5;
std::vector<std::pair<std::string, int>> keepalive_client_args();
std::vector<std::pair<std::string, int>> keepalive_server_args();

// kNotInitialized goes out as UNAVAILABLE (the client waits and retries, as for a shard that is
// down) with a typed proto::ShardError in the status's details, so the chief can tell it from a
// connection that failed and re-initialise the shard. kWaiting goes out alike: the client sends
// the same call again for as long as it takes, without the retry limit of a shard that is down.
grpc::Status to_grpc(const ShardStatus& status);
bool is_not_initialized(const grpc::Status& status);
bool is_waiting_for_trainers(const grpc::Status& status);

}  // namespace cifar::ps
