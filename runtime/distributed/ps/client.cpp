#include "distributed/ps/client.h"

#include <fmt/format.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <thread>
#include <vector>

#include "distributed/ps/job_tls.h"
#include "distributed/ps/peer_probe.h"
#include "distributed/ps/shard_messages.h"
#include "distributed/ps/tensor_codec.h"
#include "distributed/ps/transport.h"
#include "distributed/ps/wire_framing.h"
#include "health/heartbeat.h"
#include "health/waits.h"
#include "metrics/runtime_metrics.h"
#include "metrics/seconds_since.h"
#include "proto/ps.grpc.pb.h"
#include "train/fence.h"

namespace cifar::ps {
namespace {

using Clock = std::chrono::steady_clock;
using Stub = proto::ParameterServer::Stub;

std::string describe(const grpc::Status& s) {
  return "[" + std::to_string(static_cast<int>(s.error_code())) + "] " + s.error_message();
}

// Why `address` did not answer, from a connection of our own ("" where that adds nothing).
std::string why_unreachable(const std::string& address) {
  constexpr std::chrono::seconds kProbeTimeout(3);
  const auto why = explain_unreachable(address, probe_peer(address, kProbeTimeout), kProbeTimeout);
  return why.empty() ? why : "; " + why;
}

// How long a shard that is down, or has no parameters yet, is waited for.
std::chrono::milliseconds retry_window(const ClientOptions& options) {
  return std::chrono::milliseconds(static_cast<int64_t>(options.retry_seconds * 1000));
}

}  // namespace

class PsClient::Connection {
 public:
  Connection(int index, std::string address, int stripe, const ClientOptions& options,
             metrics::RuntimeMetrics* metrics)
      : index_(index),
        address_(std::move(address)),
        stripe_(std::to_string(stripe)),
        name_("PS shard " + std::to_string(index) + " (" + address_ +
              (options.stripes > 1 ? ", stripe " + stripe_ : "") + ")"),
        options_(options),
        metrics_(metrics),
        expected_incarnation_(static_cast<size_t>(index) < options.ps_incarnations.size()
                                  ? options.ps_incarnations[static_cast<size_t>(index)]
                                  : 0) {
    grpc::ChannelArguments args;
    // A TCP connection of its own (channels to one address would share one): the point of stripes.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    const int limit = static_cast<int>(std::min<int64_t>(options.max_message_bytes, INT32_MAX));
    args.SetMaxReceiveMessageSize(limit);
    args.SetMaxSendMessageSize(limit);
    // gRPC's reconnect backoff grows to 120 s by default; a restarted PS should be found fast.
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    // ... and its new address too: a replaced PS pod has a new IP under the same DNS name, which
    // gRPC looks up again at most every 30 s by default.
    args.SetInt(GRPC_ARG_DNS_MIN_TIME_BETWEEN_RESOLUTIONS_MS, 1000);
    for (const auto& [name, value] : large_message_channel_args()) args.SetInt(name, value);
    for (const auto& [name, value] : keepalive_client_args()) args.SetInt(name, value);
    channel_ = grpc::CreateCustomChannel(address_, channel_credentials(options.tls), args);
    stub_ = proto::ParameterServer::NewStub(channel_);
    generic_ = std::make_unique<grpc::GenericStub>(channel_);
  }

  Stub& stub() { return *stub_; }
  [[nodiscard]] const std::string& name() const { return name_; }

  // A call whose messages are gRPC byte buffers (framed without copies, wire_framing.h).
  grpc::Status raw_call(grpc::ClientContext& context, const std::string& method,
                        const grpc::ByteBuffer& request, grpc::ByteBuffer* response) {
    std::promise<grpc::Status> done;
    generic_->UnaryCall(&context, method, grpc::StubOptions(), &request, response,
                        [&](const grpc::Status& s) { done.set_value(s); });
    return done.get_future().get();
  }

  // Runs `rpc` until it succeeds or fails for a reason retrying cannot fix. An unreachable or
  // restarting shard is retried with exponential backoff for options.retry_seconds; `lost` is
  // called when the shard answers that it has no parameters (restarted without a checkpoint).
  grpc::Status call(const char* what, const std::function<grpc::Status(grpc::ClientContext&)>& rpc,
                    const std::function<void(int)>& lost = {}) {
    auto give_up = Clock::now() + retry_window(options_);
    auto backoff = std::chrono::milliseconds(50);
    // What the warnings said, each once: a shard unreachable first (an old PS going) that then
    // refuses as an older incarnation than expected says so too.
    std::vector<std::string_view> warned;
    bool waiting_said = false;
    // Set once the shard answered that the job is not all there yet (trainers to join, the chief
    // to initialise the parameters): a wait by design, no stall (health/heartbeat.h).
    std::optional<health::ExpectedQuiet> by_design;
    // The whole call, its retries and their backoffs included: a stall report taken between two
    // attempts at a shard that is down names it too.
    const health::Wait in_flight(what, name_);
    while (true) {
      grpc::ClientContext context;
      address(context,
              std::chrono::milliseconds(static_cast<int64_t>(options_.call_seconds * 1000)));
      auto status = rpc(context);
      const auto code = status.error_code();
      // An older PS than expected (its node cut off, the DNS name not yet its replacement's) is
      // waited out like a PS that is down, and so is a call the PS cancelled as it shut down
      // (this client cancels none).
      const bool stale_ps = is_stale_parameter_server(status);
      if (!stale_ps && code != grpc::StatusCode::UNAVAILABLE &&
          code != grpc::StatusCode::DEADLINE_EXCEEDED && code != grpc::StatusCode::CANCELLED) {
        if (!warned.empty()) spdlog::info("{} is back", name_);
        return status;
      }
      if (is_not_initialized(status) && lost) {
        lost(index_);
        continue;
      }
      if (is_waiting_for_trainers(status)) {
        // The shard held the call for its timeout: not a shard that is down, so no retry limit.
        // The startup deadline ends a job whose trainer never comes.
        if (!waiting_said) spdlog::info("{}: {}; waiting", name_, status.error_message());
        waiting_said = true;
        if (!by_design) by_design.emplace("waiting for the other trainers to join");
        give_up = Clock::now() +
                  retry_window(options_);  // the shard answered: a later outage gets its window
        continue;
      }
      if (Clock::now() > give_up) {
        throw std::runtime_error(
            name_ + (stale_ps ? " older than expected for " : " unreachable for ") +
            fmt::format("{}", options_.retry_seconds) + " s during " + what + ": " +
            describe(status) + (stale_ps ? "" : why_unreachable(address_)));
      }
      const std::string_view state = stale_ps ? "is an older incarnation than expected"
                                     : is_not_initialized(status) ? "has no parameters yet"
                                                                  : "unreachable";
      if (!is_not_initialized(status)) {
        by_design.reset();  // down or replaced: no longer a wait by design
      } else if (!by_design) {
        by_design.emplace("waiting for the chief to initialise the parameters");
      }
      if (std::find(warned.begin(), warned.end(), state) == warned.end()) {
        spdlog::warn("{} {}: {}; retrying for up to {} s", name_, state, status.error_message(),
                     options_.retry_seconds);
        warned.push_back(state);
      }
      if (metrics_ != nullptr) metrics_->record_ps_retry();
      // Waits for the backoff, or less if the channel (re)connects first: a fail-fast call on a
      // broken channel would otherwise only find the restarted PS at gRPC's own reconnect pace.
      (void)channel_->WaitForConnected(std::chrono::system_clock::now() + backoff);
      backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
    }
  }

  // What every call says: its deadline, the job's token, the stripe, who calls and which PS it
  // expects.
  void address(grpc::ClientContext& context, std::chrono::milliseconds deadline) const {
    context.set_deadline(std::chrono::system_clock::now() + deadline);
    if (!options_.token.empty()) context.AddMetadata("authorization", "Bearer " + options_.token);
    if (options_.stripes > 1) context.AddMetadata(kStripeMetadata, stripe_);
    if (options_.member) context.AddMetadata(kMemberMetadata, member_metadata(*options_.member));
    if (expected_incarnation_ > 0) {
      context.AddMetadata(kPsIncarnationMetadata, std::to_string(expected_incarnation_));
    }
  }

  // Throws a clear error for a failed status.
  void check(const grpc::Status& status, const char* what) const {
    if (is_stale_incarnation(status)) {
      throw train::Replaced(std::nullopt,
                            name_ + " refused its " + what + ": " + status.error_message());
    }
    if (!status.ok()) {
      throw std::runtime_error(name_ + " " + what + " failed: " + describe(status));
    }
  }

 private:
  int index_;
  std::string address_;
  std::string stripe_;
  std::string name_;  // for messages: "PS shard 5 (host:port, stripe 1)"
  const ClientOptions& options_;
  metrics::RuntimeMetrics* metrics_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<Stub> stub_;
  std::unique_ptr<grpc::GenericStub> generic_;
  int64_t expected_incarnation_;  // of this PS, at least (0: any)
};

PsClient::PsClient(ClientOptions options, ShardLayout layout, metrics::RuntimeMetrics* metrics)
    : options_(std::move(options)),
      layout_(std::move(layout)),
      metrics_(metrics),
      versions_(static_cast<size_t>(layout_.shards()), 0) {
  const auto servers = static_cast<int>(options_.addresses.size());
  if (options_.stripes < 1 || servers * options_.stripes != layout_.shards()) {
    throw std::invalid_argument("the cluster lists " + std::to_string(servers) + " PS addresses (" +
                                std::to_string(options_.stripes) +
                                " stripes each) but the layout has " +
                                std::to_string(layout_.shards()) + " shards");
  }
  for (int s = 0; s < layout_.shards(); ++s) {
    shards_.push_back(std::make_unique<Connection>(
        s, options_.addresses[static_cast<size_t>(s / options_.stripes)], s % options_.stripes,
        options_, metrics_));
  }
}

PsClient::~PsClient() = default;

void PsClient::for_each_shard(const std::function<void(int)>& body) {
  // Shard 0 on this thread, the others on the pool's threads (kept from step to step).
  std::vector<std::future<void>> calls;
  calls.reserve(shards_.size() - 1);
  for (size_t s = 1; s < shards_.size(); ++s) {
    auto call =
        std::make_shared<std::packaged_task<void()>>([&body, s] { body(static_cast<int>(s)); });
    calls.push_back(call->get_future());
    calls_.run([call] { (*call)(); });
  }
  std::exception_ptr failure;
  try {
    body(0);
  } catch (...) {
    failure = std::current_exception();
  }
  for (auto& c : calls) {  // every call ends before `body` goes out of scope
    try {
      c.get();
    } catch (...) {
      if (!failure) failure = std::current_exception();
    }
  }
  if (failure) std::rethrow_exception(failure);
}

std::vector<proto::RegisterReply> PsClient::register_trainer(int trainer,
                                                             bool wait_until_initialized) {
  std::vector<proto::RegisterReply> replies(shards_.size());
  for_each_shard([&](int s) {
    const auto request = register_request(trainer, s);
    const auto give_up = Clock::now() + retry_window(options_);
    auto& reply = replies[static_cast<size_t>(s)];
    while (true) {
      reply.Clear();
      auto& shard = *shards_[static_cast<size_t>(s)];
      shard.check(shard.call("register",
                             [&](grpc::ClientContext& c) {
                               return shard.stub().Register(&c, request, &reply);
                             }),
                  "register");
      if (reply.initialized() || !wait_until_initialized) break;
      if (Clock::now() > give_up) {
        throw std::runtime_error(shard.name() + " got no parameters from the master within " +
                                 std::to_string(options_.retry_seconds) + " s");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    versions_[static_cast<size_t>(s)] = reply.version();
  });
  return replies;
}

void PsClient::initialize(const std::vector<std::unique_ptr<proto::InitRequest>>& requests) {
  for_each_shard([&](int s) {
    const auto& request = requests.at(static_cast<size_t>(s));
    if (!request) return;
    proto::InitReply reply;
    auto& shard = *shards_[static_cast<size_t>(s)];
    shard.check(shard.call("initialize",
                           [&](grpc::ClientContext& c) {
                             return shard.stub().Initialize(&c, *request, &reply);
                           }),
                "initialize");
    versions_[static_cast<size_t>(s)] = reply.version();
  });
}

namespace {

constexpr const char* kPushPullMethod = "/cifar.ps.proto.ParameterServer/PushPull";
constexpr const char* kPullMethod = "/cifar.ps.proto.ParameterServer/Pull";

struct ReceivedParams {
  proto::ParamsReply header;  // version and done
  int64_t bytes = 0;
};

// The elements of a contiguous float32 tensor (the model's parameters and gradients are).
float* float_data(const torch::Tensor& t, const char* what) {
  if (t.scalar_type() != torch::kFloat32 || !t.is_contiguous() ||
      t.device().type() != torch::kCPU) {
    throw std::invalid_argument(std::string(what) + " must be contiguous float32 CPU tensors");
  }
  return t.data_ptr<float>();
}

// Reads a shard's ParamsReply straight from gRPC's buffer into the model's parameters (float32
// pieces land in place; fp16/bf16 ones are converted after).
ReceivedParams read_params(const ShardLayout& layout, int shard, const grpc::ByteBuffer& buffer,
                           const std::vector<torch::Tensor>& params) {
  const auto& pieces = layout.pieces(shard);
  std::vector<float*> regions;
  std::vector<int64_t> sizes;
  regions.reserve(pieces.size());
  sizes.reserve(pieces.size());
  for (const auto& piece : pieces) {
    regions.push_back(float_data(params.at(static_cast<size_t>(piece.parameter)), "parameters") +
                      piece.offset);
    sizes.push_back(piece.length);
  }
  PieceReceiver receiver("params", std::move(regions), std::move(sizes));
  ReceivedParams received;
  try {
    read_message(buffer, proto::ParamsReply::kParamsFieldNumber, &received.header,
                 std::ref(receiver));
    torch::NoGradGuard no_grad;  // the conversions write into parameters
    receiver.finish();
  } catch (const std::runtime_error& e) {
    throw std::runtime_error("PS shard " + std::to_string(shard) +
                             " sent a bad reply: " + e.what());
  }
  received.bytes = receiver.wire_bytes();
  return received;
}

// The newest version, any shard's done, the bytes of all.
PullResult combine(const std::vector<PullResult>& per_shard) {
  PullResult total;
  for (const auto& e : per_shard) {
    total.version = std::max(total.version, e.version);
    total.done = total.done || e.done;
    total.stopping = total.stopping || e.stopping;
    total.redo = total.redo || e.redo;
    total.pushed_bytes += e.pushed_bytes;
    total.pulled_bytes += e.pulled_bytes;
  }
  return total;
}

}  // namespace

PullResult PsClient::push_pull(int trainer, const std::vector<torch::Tensor>& grads,
                               const std::vector<torch::Tensor>& params, double lr,
                               const PushNote& note) {
  const auto start = Clock::now();
  std::vector<PullResult> per_shard(shards_.size());
  const auto push_to = [&](int s) {
    auto& shard = *shards_[static_cast<size_t>(s)];
    auto& result = per_shard[static_cast<size_t>(s)];
    proto::PushRequest header;
    header.set_trainer(trainer);
    header.set_version(versions_[static_cast<size_t>(s)]);
    header.set_learning_rate(lr);
    header.set_reply_dtype(options_.wire_dtype);
    if (note.plan.id() != 0) *header.mutable_plan() = note.plan;
    *header.mutable_samples() = note.samples;
    std::vector<WirePiece> pieces;
    pieces.reserve(layout_.pieces(s).size());
    for (const auto& piece : layout_.pieces(s)) {
      const auto& grad = grads.at(static_cast<size_t>(piece.parameter));
      if (options_.wire_dtype == proto::FLOAT32) {
        // The gradient's own memory: it is sent (and maybe resent) before this returns.
        pieces.push_back({piece.key, proto::FLOAT32, piece.length,
                          float_data(grad, "gradients") + piece.offset, nullptr});
      } else {
        const auto wire =
            to_wire(grad.reshape({-1}).narrow(0, piece.offset, piece.length), options_.wire_dtype);
        pieces.push_back({piece.key, options_.wire_dtype, piece.length, wire.data_ptr(),
                          std::make_shared<const torch::Tensor>(wire)});
      }
      result.pushed_bytes += piece.length * wire_element_bytes(options_.wire_dtype);
    }
    const auto request = frame_message(header, proto::PushRequest::kGradsFieldNumber, pieces);
    grpc::ByteBuffer reply;
    auto status = shard.call(
        "push",
        [&](grpc::ClientContext& c) {
          reply.Clear();
          return shard.raw_call(c, kPushPullMethod, request, &reply);
        },
        on_shard_lost_);
    const bool rejoined = status.error_code() == grpc::StatusCode::ABORTED;
    if (rejoined) {
      // Dropped from a round, or the shard went back to a checkpoint: rejoin and take its
      // current parameters; this step's gradient is not applied on this shard.
      spdlog::warn("{}: {}; rejoining", shard.name(), status.error_message());
      const auto again = register_request(trainer, s);
      proto::RegisterReply registered;
      shard.check(shard.call("register",
                             [&](grpc::ClientContext& c) {
                               return shard.stub().Register(&c, again, &registered);
                             }),
                  "register");
      status = pull_shard(trainer, s, &reply);
    }
    shard.check(status, "push");
    take_params(s, reply, params, result);
    // An elastic synchronous job's step not applied here is computed again, not counted.
    if (rejoined && note.plan.id() != 0) result.redo = true;
  };
  // An elastic synchronous job's push goes to the other shards once PS 0's first stripe completed
  // the update: so they only ever collect an update whose plan stands (PS 0 plans it again while
  // it waits, never after), and cannot apply one that PS 0 has the trainers compute again.
  if (note.plan.id() != 0 && shards_.size() > 1) {
    push_to(0);
    if (!per_shard.front().redo) {
      for_each_shard([&](int s) {
        if (s > 0) push_to(s);
      });
    }
  } else {
    for_each_shard(push_to);
  }
  auto total = combine(per_shard);
  total.plan = per_shard.front().plan;
  total.samples = per_shard.front().samples;
  if (metrics_ != nullptr) {
    metrics_->record_ps_exchange(metrics::seconds_since(start), total.pushed_bytes,
                                 total.pulled_bytes);
  }
  return total;
}

PullResult PsClient::pull(int trainer, const std::vector<torch::Tensor>& params) {
  std::vector<PullResult> per_shard(shards_.size());
  for_each_shard([&](int s) {
    grpc::ByteBuffer reply;
    shards_[static_cast<size_t>(s)]->check(pull_shard(trainer, s, &reply), "pull");
    take_params(s, reply, params, per_shard[static_cast<size_t>(s)]);
  });
  return combine(per_shard);
}

PullResult PsClient::pull_when_planned(int trainer, const std::vector<torch::Tensor>& params) {
  const health::ExpectedQuiet quiet("waiting for an update that takes this trainer");
  proto::PullRequest wait;
  wait.set_wait_for_plan(true);
  std::vector<PullResult> per_shard(shards_.size());
  auto& first = per_shard.front();
  while (true) {  // each call waits up to the PS's timeout
    grpc::ByteBuffer reply;
    shards_.front()->check(pull_shard(trainer, 0, &reply, wait), "pull");
    take_params(0, reply, params, first);
    if (first.done || places_its_trainer(first.plan)) break;
  }
  proto::PullRequest level;
  level.set_at_least_version(first.version);
  for_each_shard([&](int s) {
    if (s == 0) return;
    grpc::ByteBuffer reply;
    shards_[static_cast<size_t>(s)]->check(pull_shard(trainer, s, &reply, level), "pull");
    take_params(s, reply, params, per_shard[static_cast<size_t>(s)]);
  });
  auto total = combine(per_shard);
  total.plan = first.plan;
  return total;
}

bool PsClient::beat(int trainer) {
  auto& shard = *shards_.front();
  proto::BeatRequest request;
  request.set_trainer(trainer);
  proto::BeatReply reply;
  grpc::ClientContext context;
  shard.address(context, std::chrono::seconds(2));
  return shard.stub().Beat(&context, request, &reply).ok();
}

void PsClient::leave(int trainer) {
  proto::LeaveRequest request;
  request.set_trainer(trainer);
  for_each_shard([&](int s) {
    auto& shard = *shards_[static_cast<size_t>(s)];
    proto::LeaveReply reply;
    shard.check(
        shard.call("leave",
                   [&](grpc::ClientContext& c) { return shard.stub().Leave(&c, request, &reply); }),
        "leave");
  });
}

proto::RegisterRequest PsClient::register_request(int trainer, int shard) const {
  proto::RegisterRequest request;
  request.set_trainer(trainer);
  request.set_total_updates(options_.total_updates);
  request.mutable_layout()->set_fingerprint(layout_.fingerprint());
  request.mutable_layout()->set_pieces(static_cast<uint32_t>(layout_.pieces(shard).size()));
  return request;
}

grpc::Status PsClient::pull_shard(int trainer, int shard, grpc::ByteBuffer* reply,
                                  const proto::PullRequest& wait) {
  proto::PullRequest request = wait;
  request.set_trainer(trainer);
  request.set_reply_dtype(options_.wire_dtype);
  const auto framed = frame_message(request, 0, {});
  auto& connection = *shards_[static_cast<size_t>(shard)];
  return connection.call(
      "pull",
      [&](grpc::ClientContext& c) {
        reply->Clear();
        return connection.raw_call(c, kPullMethod, framed, reply);
      },
      on_shard_lost_);
}

void PsClient::take_params(int shard, const grpc::ByteBuffer& reply,
                           const std::vector<torch::Tensor>& params, PullResult& result) {
  const auto received = read_params(layout_, shard, reply, params);
  result.pulled_bytes = received.bytes;
  result.version = received.header.version();
  result.done = received.header.done();
  result.stopping = received.header.stopping();
  result.plan = received.header.plan();
  result.redo = received.header.redo();
  if (received.header.has_samples()) result.samples = received.header.samples();
  versions_[static_cast<size_t>(shard)] = received.header.version();
}

std::vector<proto::StateReply> PsClient::get_state() {
  std::vector<proto::StateReply> replies(shards_.size());
  for_each_shard([&](int s) {
    auto& shard = *shards_[static_cast<size_t>(s)];
    shard.check(shard.call("get state",
                           [&](grpc::ClientContext& c) {
                             return shard.stub().GetState(&c, proto::StateRequest(),
                                                          &replies[static_cast<size_t>(s)]);
                           }),
                "get state");
  });
  return replies;
}

void PsClient::finish() {
  for_each_shard([&](int s) {
    auto& shard = *shards_[static_cast<size_t>(s)];
    proto::FinishReply reply;
    shard.check(shard.call("finish",
                           [&](grpc::ClientContext& c) {
                             return shard.stub().Finish(&c, proto::FinishRequest(), &reply);
                           }),
                "finish");
  });
}

}  // namespace cifar::ps
