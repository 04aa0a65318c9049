#include "distributed/ps/transport.h"

#include <grpcpp/grpcpp.h>

#include "proto/ps.pb.h"

namespace cifar::ps {
namespace {

grpc::Status unavailable_because(proto::ShardError::Reason reason, const std::string& message) {
  proto::ShardError error;
  error.set_reason(reason);
  return {grpc::StatusCode::UNAVAILABLE, message, error.SerializeAsString()};
}

bool unavailable_because_of(const grpc::Status& status, proto::ShardError::Reason reason) {
  proto::ShardError error;
  return status.error_code() == grpc::StatusCode::UNAVAILABLE && !status.error_details().empty() &&
         error.ParseFromString(status.error_details()) && error.reason() == reason;
}

}  // namespace

grpc::Status to_grpc(const ShardStatus& status) {
  using Code = ShardStatus::Code;
  switch (status.code()) {
    case Code::kOk:
      return grpc::Status::OK;
    case Code::kInvalidArgument:
      return {grpc::StatusCode::INVALID_ARGUMENT, status.message()};
    case Code::kNotInitialized:
      return unavailable_because(proto::ShardError::NOT_INITIALIZED, status.message());
    case Code::kWaiting:
      return unavailable_because(proto::ShardError::WAITING_FOR_TRAINERS, status.message());
    case Code::kRetry:
      return {grpc::StatusCode::ABORTED, status.message()};
    case Code::kWrongJob:
      return {grpc::StatusCode::FAILED_PRECONDITION, status.message()};
  }
  return {grpc::StatusCode::INTERNAL, status.message()};
}

std::vector<std::pair<std::string, int>> large_message_channel_args() {
  // Each round trip moves the whole model twice: with HTTP/2's default 64 KB stream window and
  // 16 KB frames that is thousands of frames and window updates per message.
  return {{GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 64 << 20},
          {GRPC_ARG_HTTP2_MAX_FRAME_SIZE, (16 << 20) - 1},
          {GRPC_ARG_HTTP2_WRITE_BUFFER_SIZE, 64 << 20},
          {GRPC_ARG_TCP_READ_CHUNK_SIZE, 4 << 20},
          {GRPC_ARG_TCP_MIN_READ_CHUNK_SIZE, 1 << 20},
          {GRPC_ARG_TCP_MAX_READ_CHUNK_SIZE, 16 << 20}};
}

std::vector<std::pair<std::string, int>> keepalive_client_args() {
  return {{GRPC_ARG_KEEPALIVE_TIME_MS, kKeepaliveSeconds * 1000},
          {GRPC_ARG_KEEPALIVE_TIMEOUT_MS, kKeepaliveTimeoutSeconds * 1000},
          {GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1},
          {GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0}};
}

std::vector<std::pair<std::string, int>> keepalive_server_args() {
  // Pings as often as the clients send them, with or without calls, are never a strike.
  return {{GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1},
          {GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, kKeepaliveSeconds * 1000 / 2},
          {GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0}};
}

bool is_not_initialized(const grpc::Status& status) {
  return unavailable_because_of(status, proto::ShardError::NOT_INITIALIZED);
}

bool is_waiting_for_trainers(const grpc::Status& status) {
  return unavailable_because_of(status, proto::ShardError::WAITING_FOR_TRAINERS);
}

}  // namespace cifar::ps
