#include "distributed/ps/server.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <optional>
#include <stdexcept>
#include <thread>
#include <utility>

#include "distributed/ps/call_pool.h"
#include "distributed/ps/membership.h"
#include "distributed/ps/token_auth.h"
#include "distributed/ps/transport.h"
#include "distributed/ps/wire_framing.h"
#include "proto/ps.grpc.pb.h"

namespace cifar::ps {

// PushPull, the call every training step makes, is a raw method: the gradient is read from gRPC's
// slices straight into one tensor, and the reply is framed straight from the parameter snapshot,
// without protobuf messages around the tensors (wire_framing.h). Every call names its stripe in
// the "cifar-ps-stripe" metadata (none: stripe 0, as a one-stripe trainer or a plain gRPC client
// sends), and that stripe's Shard answers it.
class ParameterServerService final : public proto::ParameterServer::WithRawCallbackMethod_PushPull<
                                         proto::ParameterServer::Service> {
 public:
  ParameterServerService(std::vector<std::shared_ptr<Shard>> stripes, int64_t incarnation)
      : stripes_(std::move(stripes)), incarnation_(incarnation) {}

  void announce_stop() { stopping_.store(true); }
  [[nodiscard]] std::optional<int64_t> replaced_by() const { return incarnation_.replaced_by(); }

  grpc::Status Register(grpc::ServerContext* context, const proto::RegisterRequest* request,
                        proto::RegisterReply* reply) override {
    Shard* shard = nullptr;
    if (auto s = admit(*context, &shard); !s.ok()) return s;
    return to_grpc(shard->register_trainer(*request, reply));
  }
  grpc::Status Initialize(grpc::ServerContext* context, const proto::InitRequest* request,
                          proto::InitReply* reply) override {
    Shard* shard = nullptr;
    if (auto s = admit(*context, &shard); !s.ok()) return s;
    return to_grpc(shard->initialize(*request, reply));
  }
  grpc::ServerUnaryReactor* PushPull(grpc::CallbackServerContext* context,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override {
    auto* reactor = context->DefaultReactor();
    Shard* shard = nullptr;
    if (auto s = admit(*context, &shard); !s.ok()) {
      reactor->Finish(s);
      return reactor;
    }
    calls_.run([this, shard, request, response, reactor] {
      reactor->Finish(push_pull(*shard, *request, response));
    });
    return reactor;
  }
  grpc::Status Pull(grpc::ServerContext* context, const proto::PullRequest* request,
                    proto::ParamsReply* reply) override {
    Shard* shard = nullptr;
    if (auto s = admit(*context, &shard); !s.ok()) return s;
    ParamsSnapshot snapshot;
    const auto status = shard->pull(*request, &snapshot);
    snapshot.stopping = stopping_.load();
    if (status.ok()) to_proto(snapshot, reply);
    return to_grpc(status);
  }
  grpc::Status GetState(grpc::ServerContext* context, const proto::StateRequest* /*request*/,
                        proto::StateReply* reply) override {
    Shard* shard = nullptr;
    if (auto s = admit(*context, &shard); !s.ok()) return s;
    return to_grpc(shard->get_state(reply));
  }
  grpc::Status Finish(grpc::ServerContext* context, const proto::FinishRequest* /*request*/,
                      proto::FinishReply* /*reply*/) override {
    Shard* shard = nullptr;
    if (auto s = admit(*context, &shard); !s.ok()) return s;
    shard->finish();
    return grpc::Status::OK;
  }
  grpc::Status Beat(grpc::ServerContext* context, const proto::BeatRequest* request,
                    proto::BeatReply* /*reply*/) override {
    Shard* shard = nullptr;
    if (auto s = admit(*context, &shard); !s.ok()) return s;
    return to_grpc(shard->beat(request->trainer()));
  }
  grpc::Status Leave(grpc::ServerContext* context, const proto::LeaveRequest* request,
                     proto::LeaveReply* /*reply*/) override {
    Shard* shard = nullptr;
    if (auto s = admit(*context, &shard); !s.ok()) return s;
    return to_grpc(shard->leave(*request));
  }

 private:
  grpc::Status push_pull(Shard& shard, const grpc::ByteBuffer& request,
                         grpc::ByteBuffer* response) const {
    if (!shard.initialized()) return to_grpc(ShardStatus::not_initialized());
    Push push;
    try {
      push = read_push(request, shard.piece_sizes());
    } catch (const std::exception& e) {
      return {grpc::StatusCode::INVALID_ARGUMENT,
              std::string("the request is not a valid PushRequest: ") + e.what()};
    }
    ParamsSnapshot snapshot;
    const auto status = shard.push_pull(push, &snapshot);
    snapshot.stopping = stopping_.load();
    if (status.ok()) *response = frame_params(snapshot);
    return to_grpc(status);
  }

  // Finds the call's stripe, and refuses a trainer of an older incarnation than one this PS has
  // served, or one that expects a newer PS than this (membership.h). (The job token was checked
  // before the call got here, by the listening port's credentials: token_auth.h.)
  [[nodiscard]] grpc::Status admit(const grpc::ServerContextBase& context, Shard** shard) {
    const auto& metadata = context.client_metadata();
    size_t stripe = 0;
    if (const auto it = metadata.find(kStripeMetadata); it != metadata.end()) {
      const std::string text(it->second.data(), it->second.size());
      const auto parsed = parse_stripe(text);
      if (!parsed || *parsed >= stripes_.size()) {
        return {grpc::StatusCode::INVALID_ARGUMENT,
                "stripe '" + text + "' is not one of this PS's " + std::to_string(stripes_.size()) +
                    " stripes"};
      }
      stripe = *parsed;
    }
    *shard = stripes_[stripe].get();
    if (const auto it = metadata.find(kPsIncarnationMetadata); it != metadata.end()) {
      auto status = incarnation_.admit(std::string_view(it->second.data(), it->second.size()));
      if (!status.ok()) return status;
    }
    if (const auto it = metadata.find(kMemberMetadata); it != metadata.end()) {
      const std::string text(it->second.data(), it->second.size());
      const auto member = parse_member_metadata(text);
      if (!member) {
        return {grpc::StatusCode::INVALID_ARGUMENT,
                "member '" + text + "' is not <trainer>@<incarnation>"};
      }
      return membership_.admit(*member);
    }
    return grpc::Status::OK;
  }

  static std::optional<size_t> parse_stripe(const std::string& text) {
    if (text.empty() || text.size() > 3 ||
        text.find_first_not_of("0123456789") != std::string::npos) {
      return std::nullopt;
    }
    return static_cast<size_t>(std::stoul(text));
  }

  std::vector<std::shared_ptr<Shard>> stripes_;
  Membership membership_;  // one for every stripe: a trainer's incarnation is the process's
  PsIncarnation incarnation_;
  std::atomic<bool> stopping_{false};
  CallPool calls_;
};

ShardServer::ShardServer(std::shared_ptr<Shard> shard, const std::string& address, DoorOptions door,
                         int64_t max_message_bytes)
    : ShardServer(std::vector<std::shared_ptr<Shard>>{std::move(shard)}, address, std::move(door),
                  max_message_bytes) {}

ShardServer::ShardServer(std::vector<std::shared_ptr<Shard>> stripes, const std::string& address,
                         DoorOptions door, int64_t max_message_bytes, int64_t incarnation)
    : stripes_(std::move(stripes)),
      service_(std::make_unique<ParameterServerService>(stripes_, incarnation)) {
  if (stripes_.empty()) throw std::invalid_argument("a PS serves at least one stripe");
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address, door_credentials(std::move(door)), &port_);
  builder.RegisterService(service_.get());
  const int limit = static_cast<int>(std::min<int64_t>(max_message_bytes, INT32_MAX));
  builder.SetMaxReceiveMessageSize(limit);
  builder.SetMaxSendMessageSize(limit);
  for (const auto& [name, value] : large_message_channel_args()) {
    builder.AddChannelArgument(name, value);
  }
  for (const auto& [name, value] : keepalive_server_args()) builder.AddChannelArgument(name, value);
  server_ = builder.BuildAndStart();
  if (!server_ || port_ == 0) {
    throw std::runtime_error("cannot serve the PS on " + address + " (is the port in use?)");
  }
}

void ShardServer::announce_stop() { service_->announce_stop(); }

std::optional<int64_t> ShardServer::replaced_by() const { return service_->replaced_by(); }

ShardServer::~ShardServer() {
  // Let calls in flight finish for a moment, then cancel the rest.
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  server_->Wait();
}

std::string listen_address(const std::string& advertised) {
  const auto colon = advertised.rfind(':');
  return "0.0.0.0" + advertised.substr(colon);
}

}  // namespace cifar::ps
