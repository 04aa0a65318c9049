#include "dist/ps/server.h"

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <stdexcept>
#include <thread>
#include <utility>

#include "dist/ps/call_pool.h"
#include "dist/ps/ps_checkpoint.h"
#include "dist/ps/wire_framing.h"
#include "metrics/runtime_metrics.h"
#include "proto/ps.grpc.pb.h"
#include "train/checkpoint.h"
#include "train/setup.h"

namespace cifar::ps {

// PushPull, the call every training step makes, is a raw method: the gradient is read from gRPC's
// slices straight into one tensor, and the reply is framed straight from the parameter snapshot,
// without protobuf messages around the tensors (wire_framing.h).
class ParameterServerService final : public proto::ParameterServer::WithRawCallbackMethod_PushPull<
                                         proto::ParameterServer::Service> {
 public:
  ParameterServerService(std::shared_ptr<Shard> shard, std::string token)
      : shard_(std::move(shard)), token_(std::move(token)) {}

  grpc::Status Register(grpc::ServerContext* context, const proto::RegisterRequest* request,
                        proto::RegisterReply* reply) override {
    if (auto s = authorize(*context); !s.ok()) return s;
    return shard_->register_trainer(*request, reply);
  }
  grpc::Status Initialize(grpc::ServerContext* context, const proto::InitRequest* request,
                          proto::InitReply* reply) override {
    if (auto s = authorize(*context); !s.ok()) return s;
    return shard_->initialize(*request, reply);
  }
  grpc::ServerUnaryReactor* PushPull(grpc::CallbackServerContext* context,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override {
    auto* reactor = context->DefaultReactor();
    if (auto s = authorize(*context); !s.ok()) {
      reactor->Finish(s);
      return reactor;
    }
    calls_.run(
        [this, request, response, reactor] { reactor->Finish(push_pull(*request, response)); });
    return reactor;
  }
  grpc::Status Pull(grpc::ServerContext* context, const proto::PullRequest* request,
                    proto::ParamsReply* reply) override {
    if (auto s = authorize(*context); !s.ok()) return s;
    ParamsSnapshot snapshot;
    auto status = shard_->pull(*request, &snapshot);
    if (status.ok()) to_proto(snapshot, reply);
    return status;
  }
  grpc::Status GetState(grpc::ServerContext* context, const proto::StateRequest* /*request*/,
                        proto::StateReply* reply) override {
    if (auto s = authorize(*context); !s.ok()) return s;
    return shard_->get_state(reply);
  }
  grpc::Status Finish(grpc::ServerContext* context, const proto::FinishRequest* /*request*/,
                      proto::FinishReply* /*reply*/) override {
    if (auto s = authorize(*context); !s.ok()) return s;
    shard_->finish();
    return grpc::Status::OK;
  }

 private:
  grpc::Status push_pull(const grpc::ByteBuffer& request, grpc::ByteBuffer* response) {
    if (!shard_->initialized()) return not_initialized();
    Push push;
    try {
      push = read_push(request, shard_->piece_sizes());
    } catch (const std::exception& e) {
      return {grpc::StatusCode::INVALID_ARGUMENT,
              std::string("the request is not a valid PushRequest: ") + e.what()};
    }
    ParamsSnapshot snapshot;
    auto status = shard_->push_pull(push, &snapshot);
    if (status.ok()) *response = frame_params(snapshot);
    return status;
  }

  [[nodiscard]] grpc::Status authorize(const grpc::ServerContextBase& context) const {
    if (token_.empty()) return grpc::Status::OK;
    const auto& metadata = context.client_metadata();
    const auto it = metadata.find("authorization");
    if (it == metadata.end() ||
        std::string(it->second.data(), it->second.size()) != "Bearer " + token_) {
      return {grpc::StatusCode::UNAUTHENTICATED,
              "missing or wrong job token (CIFAR_PS_TOKEN must match the PS's)"};
    }
    return grpc::Status::OK;
  }

  std::shared_ptr<Shard> shard_;
  std::string token_;
  CallPool calls_;
};

ShardServer::ShardServer(std::shared_ptr<Shard> shard, const std::string& address,
                         std::string token, int64_t max_message_bytes)
    : shard_(std::move(shard)),
      service_(std::make_unique<ParameterServerService>(shard_, std::move(token))) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port_);
  builder.RegisterService(service_.get());
  const int limit = static_cast<int>(std::min<int64_t>(max_message_bytes, INT32_MAX));
  builder.SetMaxReceiveMessageSize(limit);
  builder.SetMaxSendMessageSize(limit);
  for (const auto& [name, value] : large_message_channel_args()) {
    builder.AddChannelArgument(name, value);
  }
  server_ = builder.BuildAndStart();
  if (!server_ || port_ == 0) {
    throw std::runtime_error("cannot serve the PS on " + address + " (is the port in use?)");
  }
}

ShardServer::~ShardServer() {
  // Let calls in flight finish for a moment, then cancel the rest.
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  server_->Wait();
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

std::string listen_address(const std::string& advertised) {
  const auto colon = advertised.rfind(':');
  return "0.0.0.0" + advertised.substr(colon);
}

void run_parameter_server(const train::TrainConfig& config) {
  const auto& dist = config.distributed;
  const auto& job = dist.job;
  const int shards = static_cast<int>(job.cluster.ps.size());
  // Each push is applied on a gRPC thread; a few intra-op threads per update is plenty.
  torch::set_num_threads(std::max(1, config.threads > 0 ? config.threads : 2));

  auto metrics = train::make_runtime_metrics(config);
  ShardOptions options;
  options.index = job.index;
  options.mode = parse_mode(dist.ps.mode);
  options.staleness = dist.ps.staleness;
  options.staleness_lr = dist.ps.staleness_lr;
  options.timeout = std::chrono::milliseconds(static_cast<int64_t>(dist.ps.timeout_seconds * 1000));
  auto shard = std::make_shared<Shard>(options, metrics.get());

  // A restarted PS takes its shard from the newest checkpoint; a fresh one waits for the master.
  const train::CheckpointManager checkpoints(config.model_dir, train::run_name(config),
                                             config.keep_checkpoints);
  if (auto init =
          init_request_from_checkpoints(checkpoints.list(), job.index, shards, config.optimizer)) {
    proto::InitReply reply;
    if (auto status = shard->initialize(*init, &reply); !status.ok()) {
      throw std::runtime_error("cannot restore the shard from its checkpoint: " +
                               status.error_message());
    }
  }

  const auto address = listen_address(job.cluster.ps.at(static_cast<size_t>(job.index)));
  ShardServer server(shard, address, dist.ps.token, dist.ps.max_message_mb << 20);
  spdlog::info("ps {}: serving shard {} of {} on {} (mode {})", job.index, job.index, shards,
               address, dist.ps.mode);
  shard->wait_until_finished(options.timeout);
  spdlog::info("ps {}: job finished at version {}", job.index, shard->version());
}

}  // namespace cifar::ps
