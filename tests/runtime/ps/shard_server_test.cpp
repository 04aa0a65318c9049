// A shard served over real gRPC on loopback, driven by a raw client: the five modes' semantics,
// and bad input (wrong shapes, dtypes, keys, trainers, oversized and garbage messages, tokens)
// answered with an error status while the shard keeps serving with its state unharmed.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <prometheus/registry.h>
#include <torch/torch.h>

#include <cmath>
#include <future>
#include <limits>
#include <optional>
#include <string>
#include <thread>

#include "distributed/ps/membership.h"
#include "distributed/ps/server.h"
#include "distributed/ps/tensor_codec.h"
#include "distributed/ps/transport.h"
#include "metrics/runtime_metrics.h"
#include "proto/ps.grpc.pb.h"

namespace cifar::ps {
namespace {

using namespace std::chrono_literals;
constexpr uint64_t kFingerprint = 42;
const std::vector<int64_t> kPieceSizes = {4, 3};

proto::WireTensor piece(uint32_t key, const std::vector<float>& values) {
  proto::WireTensor t;
  t.set_key(key);
  encode(torch::tensor(values), proto::FLOAT32, &t);
  return t;
}

std::vector<float> values_of(const proto::WireTensor& t) {
  const auto v = decode(t);
  return {v.data_ptr<float>(), v.data_ptr<float>() + v.numel()};
}

class ServedShard {
 public:
  explicit ServedShard(Mode mode, std::string token = "", int64_t max_bytes = 1 << 20,
                       std::chrono::milliseconds timeout = 5s, int64_t staleness = 1,
                       int stripes = 1, metrics::RuntimeMetrics* metrics = nullptr,
                       int64_t incarnation = 0) {
    std::vector<std::shared_ptr<Shard>> shards;
    for (int stripe = 0; stripe < stripes; ++stripe) {
      ShardOptions options;
      options.mode = mode;
      options.stripe = stripe;
      options.timeout = timeout;
      options.staleness = staleness;
      shards.push_back(std::make_shared<Shard>(options, metrics));
    }
    DoorOptions door;
    door.token = std::move(token);
    server_ = std::make_unique<ShardServer>(shards, "127.0.0.1:0", std::move(door), max_bytes,
                                            incarnation);
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(server_->port()),
                                   grpc::InsecureChannelCredentials());
    stub_ = proto::ParameterServer::NewStub(channel_);
  }

  grpc::Status initialize(uint64_t fingerprint = kFingerprint, const std::string& optimizer = "sgd",
                          int64_t version = 0, int trainers = 2, int min_trainers = 0) {
    proto::InitRequest request;
    request.set_version(version);
    request.mutable_layout()->set_fingerprint(fingerprint);
    request.mutable_layout()->set_pieces(2);
    request.set_trainers(trainers);
    request.set_min_trainers(min_trainers);
    request.set_total_updates(100);
    request.mutable_optimizer()->set_name(optimizer);  // plain SGD: p -= lr * g
    *request.add_params() = piece(0, {1, 2, 3, 4});
    *request.add_params() = piece(1, {5, 6, 7});
    proto::InitReply reply;
    grpc::ClientContext context;
    name_stripe(context);
    return stub_->Initialize(&context, request, &reply);
  }

  grpc::Status register_trainer(int trainer, uint64_t fingerprint = kFingerprint) {
    proto::RegisterRequest request;
    request.set_trainer(trainer);
    request.mutable_layout()->set_fingerprint(fingerprint);
    request.mutable_layout()->set_pieces(2);
    proto::RegisterReply reply;
    grpc::ClientContext context;
    name_stripe(context);
    return stub_->Register(&context, request, &reply);
  }

  // Initialises the shard and registers both of its trainers, as a job whose pods all started.
  grpc::Status start() {
    for (auto status : {initialize(), register_trainer(0), register_trainer(1)}) {
      if (!status.ok()) return status;
    }
    return grpc::Status::OK;
  }

  static proto::PushRequest push(int trainer, int64_t version, float g0, float g1) {
    proto::PushRequest request;
    request.set_trainer(trainer);
    request.set_version(version);
    request.set_learning_rate(1.0);
    *request.add_grads() = piece(0, {g0, g0, g0, g0});
    *request.add_grads() = piece(1, {g1, g1, g1});
    return request;
  }

  grpc::Status push_pull(const proto::PushRequest& request, proto::ParamsReply* reply,
                         const std::string& token = "") {
    grpc::ClientContext context;
    name_stripe(context);
    if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
    return stub_->PushPull(&context, request, reply);
  }

  // An elastic job of up to `trainers` trainers, of which updates take at least `min_trainers`.
  grpc::Status initialize_elastic(int trainers, int min_trainers) {
    return initialize(kFingerprint, "sgd", 0, trainers, min_trainers);
  }

  grpc::Status pull(const proto::PullRequest& request, proto::ParamsReply* reply) {
    grpc::ClientContext context;
    name_stripe(context);
    return stub_->Pull(&context, request, reply);
  }

  grpc::Status leave(int trainer) {
    proto::LeaveRequest request;
    request.set_trainer(trainer);
    proto::LeaveReply reply;
    grpc::ClientContext context;
    name_stripe(context);
    return stub_->Leave(&context, request, &reply);
  }

  proto::StateReply state() {
    proto::StateReply reply;
    grpc::ClientContext context;
    name_stripe(context);
    EXPECT_TRUE(stub_->GetState(&context, proto::StateRequest(), &reply).ok());
    return reply;
  }

  std::shared_ptr<grpc::Channel> channel() { return channel_; }
  // Later calls carry this stripe metadata ("" sends none).
  void use_stripe(std::string stripe) { stripe_ = std::move(stripe); }
  // The "cifar-member" metadata the calls carry from now on ("": none).
  void call_as(std::string member) { member_ = std::move(member); }
  // The "cifar-ps-incarnation" metadata the calls carry from now on ("": none).
  void expect_ps(std::string incarnation) { expected_ps_ = std::move(incarnation); }
  [[nodiscard]] const ShardServer& server() const { return *server_; }

 private:
  void name_stripe(grpc::ClientContext& context) const {
    if (!stripe_.empty()) context.AddMetadata(kStripeMetadata, stripe_);
    if (!member_.empty()) context.AddMetadata(kMemberMetadata, member_);
    if (!expected_ps_.empty()) context.AddMetadata(kPsIncarnationMetadata, expected_ps_);
  }

  std::string stripe_;
  std::string member_;
  std::string expected_ps_;
  std::unique_ptr<ShardServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<proto::ParameterServer::Stub> stub_;
};

void expect_params(const google::protobuf::RepeatedPtrField<proto::WireTensor>& params,
                   const std::vector<float>& first, const std::vector<float>& second) {
  ASSERT_EQ(params.size(), 2);
  EXPECT_EQ(values_of(params[0]), first);
  EXPECT_EQ(values_of(params[1]), second);
}

TEST(ShardServer, AnswersUnavailableUntilInitialised) {
  ServedShard shard(Mode::kAsync);
  proto::ParamsReply reply;
  const auto status = shard.push_pull(ServedShard::push(0, 0, 1, 1), &reply);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_TRUE(is_not_initialized(status))
      << "typed, not only a message: " << status.error_message();
  ASSERT_TRUE(shard.initialize().ok());
  EXPECT_TRUE(shard.push_pull(ServedShard::push(0, 0, 1, 1), &reply).ok());
}

// A PS serving two stripes: two shards of their own, each call routed by its metadata.
TEST(ShardServer, StripesAreSeparateShardsChosenByTheCallsMetadata) {
  ServedShard ps(Mode::kAsync, "", 1 << 20, 5s, 1, /*stripes=*/2);
  ps.use_stripe("1");
  ASSERT_TRUE(ps.initialize().ok());
  proto::ParamsReply reply;
  ASSERT_TRUE(ps.push_pull(ServedShard::push(0, 0, 1, 1), &reply).ok());
  expect_params(reply.params(), {0, 1, 2, 3}, {4, 5, 6});
  EXPECT_EQ(ps.state().version(), 1);

  ps.use_stripe("");  // no metadata: stripe 0, which the master has not initialised
  auto status = ps.push_pull(ServedShard::push(0, 0, 1, 1), &reply);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
  ps.use_stripe("0");
  EXPECT_EQ(ps.push_pull(ServedShard::push(0, 0, 1, 1), &reply).error_code(),
            grpc::StatusCode::UNAVAILABLE);

  for (const char* bad : {"2", "-1", "x", "99999"}) {
    ps.use_stripe(bad);
    status = ps.push_pull(ServedShard::push(0, 0, 1, 1), &reply);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << bad;
    EXPECT_NE(status.error_message().find("is not one of this PS's 2 stripes"), std::string::npos)
        << status.error_message();
    EXPECT_EQ(ps.register_trainer(0).error_code(), grpc::StatusCode::INVALID_ARGUMENT) << bad;
  }
  ps.use_stripe("1");  // untouched by all of the above
  EXPECT_EQ(ps.state().version(), 1);
  ASSERT_TRUE(ps.push_pull(ServedShard::push(0, 1, 1, 1), &reply).ok());
  expect_params(reply.params(), {-1, 0, 1, 2}, {3, 4, 5});
}

TEST(ShardServer, RefusesAnotherModelsLayout) {
  ServedShard shard(Mode::kAsync);
  ASSERT_TRUE(shard.initialize().ok());
  EXPECT_TRUE(shard.initialize().ok());  // the same job again (a restarted master): kept
  EXPECT_EQ(shard.initialize(7).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(shard.register_trainer(0, 7).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_TRUE(shard.register_trainer(0).ok());
}

// The optimizer's name is the one string a shard parses (from the master's InitRequest).
TEST(ShardServer, AnInitialisationWithAnUnknownOptimizerIsRefusedAndLeavesItUninitialised) {
  ServedShard shard(Mode::kAsync);
  const auto status = shard.initialize(kFingerprint, "lion");
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("unknown optimizer 'lion' (sgd, adam)"), std::string::npos)
      << status.error_message();
  proto::ParamsReply reply;
  EXPECT_TRUE(is_not_initialized(shard.push_pull(ServedShard::push(0, 0, 1, 1), &reply)));
  EXPECT_TRUE(shard.initialize().ok());
}

TEST(ShardServer, BadPushesGetInvalidArgumentAndLeaveTheStateUnharmed) {
  ServedShard shard(Mode::kAsync);
  ASSERT_TRUE(shard.initialize().ok());
  const auto before = shard.state();

  std::vector<std::pair<std::string, proto::PushRequest>> bad;
  auto wrong_shape = ServedShard::push(0, 0, 1, 1);
  *wrong_shape.mutable_grads(1) = piece(1, {1, 1, 1, 1});
  bad.emplace_back("shape", wrong_shape);
  auto wrong_dtype = ServedShard::push(0, 0, 1, 1);
  wrong_dtype.mutable_grads(0)->set_dtype(proto::DTYPE_UNSPECIFIED);
  bad.emplace_back("dtype", wrong_dtype);
  auto short_data = ServedShard::push(0, 0, 1, 1);
  short_data.mutable_grads(0)->mutable_data()->resize(5);
  bad.emplace_back("data bytes", short_data);
  auto wrong_key = ServedShard::push(0, 0, 1, 1);
  wrong_key.mutable_grads(0)->set_key(9);
  bad.emplace_back("key", wrong_key);
  auto missing_piece = ServedShard::push(0, 0, 1, 1);
  missing_piece.mutable_grads()->RemoveLast();
  bad.emplace_back("grads: 1 of 2 pieces", missing_piece);
  bad.emplace_back("trainer 5", ServedShard::push(5, 0, 1, 1));
  bad.emplace_back("trainer -1", ServedShard::push(-1, 0, 1, 1));
  auto nan_lr = ServedShard::push(0, 0, 1, 1);
  nan_lr.set_learning_rate(std::nan(""));
  bad.emplace_back("learning rate", nan_lr);
  bad.emplace_back("negative gradient version", ServedShard::push(0, -3, 1, 1));

  for (const auto& [what, request] : bad) {
    proto::ParamsReply reply;
    const auto status = shard.push_pull(request, &reply);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << what;
    EXPECT_NE(status.error_message().find(what), std::string::npos)
        << what << " not in: " << status.error_message();
  }
  const auto after = shard.state();
  EXPECT_EQ(after.version(), before.version());
  expect_params(after.params(), {1, 2, 3, 4}, {5, 6, 7});

  proto::ParamsReply reply;  // and it still serves
  ASSERT_TRUE(shard.push_pull(ServedShard::push(0, 0, 1, 2), &reply).ok());
  expect_params(reply.params(), {0, 1, 2, 3}, {3, 4, 5});
}

TEST(ShardServer, OversizedAndGarbageMessagesAreRefusedAndServingGoesOn) {
  ServedShard shard(Mode::kAsync, "", /*max_bytes=*/64 << 10);
  ASSERT_TRUE(shard.initialize().ok());
  auto huge = ServedShard::push(0, 0, 1, 1);
  huge.mutable_grads(0)->mutable_data()->assign(256 << 10, 'x');
  proto::ParamsReply reply;
  EXPECT_EQ(shard.push_pull(huge, &reply).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);

  // Bytes that are no PushRequest at all, through gRPC's untyped stub.
  grpc::GenericStub generic(shard.channel());
  grpc::ClientContext context;
  const std::string garbage = "\xff\xff\xff\xff garbage \x01\x02";
  grpc::Slice slice(garbage);
  grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  std::promise<grpc::Status> done;
  generic.UnaryCall(&context, "/cifar.ps.proto.ParameterServer/PushPull", grpc::StubOptions(),
                    &request, &response, [&](const grpc::Status& s) { done.set_value(s); });
  const auto status = done.get_future().get();
  EXPECT_FALSE(status.ok());

  EXPECT_EQ(shard.state().version(), 0);
  EXPECT_TRUE(shard.push_pull(ServedShard::push(0, 0, 1, 1), &reply).ok());
  EXPECT_EQ(reply.version(), 1);
}

TEST(ShardServer, OnlyTheJobsTokenGetsIn) {
  ServedShard shard(Mode::kAsync, "s3cret");
  proto::ParamsReply reply;
  EXPECT_EQ(shard.push_pull(ServedShard::push(0, 0, 1, 1), &reply).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(shard.push_pull(ServedShard::push(0, 0, 1, 1), &reply, "guess").error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(shard.initialize().error_code(), grpc::StatusCode::UNAUTHENTICATED);
}

// A diverged trainer's NaN or infinite gradient would poison every trainer's parameters.
TEST(ShardServer, NonFiniteGradientsAreRefusedAndTheShardIsUnharmed) {
  for (const auto mode : {Mode::kSync, Mode::kAsync, Mode::kHogwild}) {
    ServedShard shard(mode);
    ASSERT_TRUE(shard.initialize().ok());
    ASSERT_TRUE(shard.register_trainer(0).ok());
    ASSERT_TRUE(shard.register_trainer(1).ok());
    proto::ParamsReply reply;
    for (const float bad : {std::nanf(""), std::numeric_limits<float>::infinity()}) {
      const auto status = shard.push_pull(ServedShard::push(0, 0, 1, bad), &reply);
      EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
      EXPECT_NE(status.error_message().find("NaN or infinite"), std::string::npos)
          << status.error_message();
    }
    EXPECT_EQ(shard.state().version(), 0);
  }
}

TEST(ShardServer, AsyncAppliesThenRepliesWithTheFreshParameters) {
  ServedShard shard(Mode::kAsync);
  ASSERT_TRUE(shard.initialize().ok());
  proto::ParamsReply reply;
  ASSERT_TRUE(shard.push_pull(ServedShard::push(1, 0, 1, 2), &reply).ok());
  EXPECT_EQ(reply.version(), 1);
  expect_params(reply.params(), {0, 1, 2, 3}, {3, 4, 5});
}

TEST(ShardServer, AsyncReplyAnswersWithTheCurrentParametersThenApplies) {
  ServedShard shard(Mode::kAsyncReply);
  ASSERT_TRUE(shard.initialize().ok());
  proto::ParamsReply reply;
  ASSERT_TRUE(shard.push_pull(ServedShard::push(1, 0, 1, 2), &reply).ok());
  expect_params(reply.params(), {1, 2, 3, 4}, {5, 6, 7});
  proto::StateReply state;
  for (int i = 0; i < 100 && state.version() < 1; ++i) {
    std::this_thread::sleep_for(10ms);
    state = shard.state();
  }
  EXPECT_EQ(state.version(), 1);
  expect_params(state.params(), {0, 1, 2, 3}, {3, 4, 5});
}

TEST(ShardServer, HogwildAppliesWithoutWaiting) {
  ServedShard shard(Mode::kHogwild);
  ASSERT_TRUE(shard.initialize().ok());
  proto::ParamsReply reply;
  ASSERT_TRUE(shard.push_pull(ServedShard::push(0, 0, 1, 2), &reply).ok());
  EXPECT_EQ(reply.version(), 1);
  expect_params(reply.params(), {0, 1, 2, 3}, {3, 4, 5});
}

TEST(ShardServer, SyncAveragesOneGradientFromEveryTrainer) {
  ServedShard shard(Mode::kSync);
  ASSERT_TRUE(shard.start().ok());
  proto::ParamsReply first;
  auto pending = std::async(std::launch::async,
                            [&] { return shard.push_pull(ServedShard::push(0, 0, 1, 2), &first); });
  EXPECT_EQ(pending.wait_for(300ms), std::future_status::timeout);  // waits for trainer 1
  proto::ParamsReply second;
  ASSERT_TRUE(shard.push_pull(ServedShard::push(1, 0, 3, 4), &second).ok());
  ASSERT_TRUE(pending.get().ok());
  for (const auto* reply : {&first, &second}) {
    EXPECT_EQ(reply->version(), 1);
    expect_params(reply->params(), {-1, 0, 1, 2}, {2, 3, 4});  // mean gradient 2 and 3
  }
}

TEST(ShardServer, SyncDropsASilentTrainerAfterTheTimeoutAndLetsItRejoin) {
  ServedShard shard(Mode::kSync, "", 1 << 20, /*timeout=*/400ms);
  ASSERT_TRUE(shard.start().ok());
  proto::ParamsReply reply;
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(shard.push_pull(ServedShard::push(0, 0, 1, 2), &reply).ok());
  EXPECT_GE(std::chrono::steady_clock::now() - start, 400ms);
  EXPECT_EQ(reply.version(), 1);  // applied with the one gradient that came, not dropped
  expect_params(reply.params(), {0, 1, 2, 3}, {3, 4, 5});

  // The silent trainer's late push is refused; it registers again and takes part once more.
  proto::ParamsReply late;
  EXPECT_EQ(shard.push_pull(ServedShard::push(1, 0, 1, 1), &late).error_code(),
            grpc::StatusCode::ABORTED);
  ASSERT_TRUE(shard.register_trainer(1).ok());
  auto pending = std::async(std::launch::async, [&] {
    proto::ParamsReply r;
    return shard.push_pull(ServedShard::push(1, 1, 1, 1), &r);
  });
  EXPECT_EQ(pending.wait_for(200ms), std::future_status::timeout);  // a member again: waited for
  ASSERT_TRUE(shard.push_pull(ServedShard::push(0, 1, 1, 1), &reply).ok());
  ASSERT_TRUE(pending.get().ok());
  EXPECT_EQ(reply.version(), 2);
}

// A per-trainer gauge of `m` (contract/metrics.h): its value for `trainer`, nullopt if none.
std::optional<double> trainer_gauge(metrics::RuntimeMetrics& m, const std::string& name,
                                    int trainer) {
  for (const auto& family : m.registry().Collect()) {
    if (family.name != name) continue;
    for (const auto& series : family.metric) {
      for (const auto& label : series.label) {
        if (label.name == "trainer" && label.value == std::to_string(trainer)) {
          return series.gauge.value;
        }
      }
    }
  }
  return std::nullopt;
}

// What the operator reports a job's trainers from: which train, and when one was dropped.
TEST(ShardServer, SaysWhichTrainersTrainAndTheVersionAtWhichItDroppedOne) {
  metrics::RuntimeMetrics metrics({"j", "ps", "0"}, "");
  const auto training = [&](int t) {
    return trainer_gauge(metrics, "cifar_ps_trainer_training", t);
  };
  const auto dropped_at = [&](int t) {
    return trainer_gauge(metrics, "cifar_ps_trainer_dropped_at_step", t);
  };
  ServedShard shard(Mode::kSync, "", 1 << 20, /*timeout=*/400ms, 1, 1, &metrics);
  ASSERT_TRUE(shard.initialize().ok());
  EXPECT_EQ(training(0), 0);  // not joined yet
  EXPECT_EQ(training(1), 0);
  ASSERT_TRUE(shard.register_trainer(0).ok());
  ASSERT_TRUE(shard.register_trainer(1).ok());
  EXPECT_EQ(training(0), 1);
  EXPECT_EQ(training(1), 1);
  EXPECT_EQ(dropped_at(1), std::nullopt);

  proto::ParamsReply reply;
  ASSERT_TRUE(shard.push_pull(ServedShard::push(0, 0, 1, 2), &reply).ok());  // 1 goes silent
  EXPECT_EQ(training(0), 1);
  EXPECT_EQ(training(1), 0);
  EXPECT_EQ(dropped_at(1), 0);  // dropped before the update it held up
  ASSERT_TRUE(shard.register_trainer(1).ok());
  EXPECT_EQ(training(1), 1);
  EXPECT_EQ(dropped_at(1), 0);  // when it was last dropped
}

// The fence at the parameter server (membership.h): once a trainer's newer incarnation has called,
// the older one is refused on every call, with a reason it can tell; unnamed calls still pass.
TEST(ShardServer, ATrainerOfAnOlderIncarnationThanOneServedIsRefused) {
  ServedShard shard(Mode::kAsync);
  ASSERT_TRUE(shard.initialize().ok());
  shard.call_as("0@1");
  ASSERT_TRUE(shard.register_trainer(0).ok());
  shard.call_as("0@2");  // the replacement
  ASSERT_TRUE(shard.register_trainer(0).ok());
  proto::ParamsReply reply;
  ASSERT_TRUE(shard.push_pull(ServedShard::push(0, 0, 1, 1), &reply).ok());

  shard.call_as("0@1");  // the old one, still running
  const auto refused = shard.push_pull(ServedShard::push(0, 1, 1, 1), &reply);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_TRUE(is_stale_incarnation(refused)) << refused.error_message();
  EXPECT_NE(
      refused.error_message().find("trainer 0 of incarnation 1 was replaced by incarnation 2"),
      std::string::npos)
      << refused.error_message();
  EXPECT_TRUE(is_stale_incarnation(shard.register_trainer(0)));

  shard.call_as("1@1");  // another trainer's numbers are its own
  EXPECT_TRUE(shard.register_trainer(1).ok());
  shard.call_as("");  // a trainer run without an incarnation
  EXPECT_TRUE(shard.register_trainer(0).ok());
  EXPECT_EQ(shard.state().version(), 1);  // nothing of the old one applied
  shard.call_as("zero@one");
  EXPECT_EQ(shard.register_trainer(0).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

// The other way round: a trainer created after this PS was replaced expects the newer one, and an
// old PS (left running on a cut-off node) refuses it, serves nothing more, and knows it must stop.
TEST(ShardServer, APsOlderThanTheCallExpectsRefusesItAndLearnsItWasReplaced) {
  ServedShard shard(Mode::kAsync, "", 1 << 20, 5s, 1, 1, nullptr, /*incarnation=*/2);
  ASSERT_TRUE(shard.initialize().ok());
  shard.expect_ps("2");  // a trainer created with this PS
  ASSERT_TRUE(shard.register_trainer(0).ok());
  EXPECT_FALSE(shard.server().replaced_by());
  proto::ParamsReply reply;
  ASSERT_TRUE(shard.push_pull(ServedShard::push(0, 0, 1, 1), &reply).ok());

  shard.expect_ps("3");  // a trainer created after the PS's replacement
  const auto refused = shard.push_pull(ServedShard::push(1, 1, 1, 1), &reply);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_TRUE(is_stale_parameter_server(refused)) << refused.error_message();
  EXPECT_FALSE(is_stale_incarnation(refused));  // not the trainer's fault: it must not stop
  EXPECT_NE(refused.error_message().find(
                "this parameter server, of incarnation 2, was replaced by incarnation 3"),
            std::string::npos)
      << refused.error_message();
  EXPECT_EQ(shard.server().replaced_by(), 3);
  shard.expect_ps("");
  EXPECT_EQ(shard.state().version(), 1);  // nothing of the refused push applied

  shard.expect_ps("three");
  EXPECT_EQ(shard.register_trainer(0).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  // A PS run without an incarnation serves any trainer.
  ServedShard unnumbered(Mode::kAsync);
  unnumbered.expect_ps("9");
  EXPECT_TRUE(unnumbered.initialize().ok());
  EXPECT_FALSE(unnumbered.server().replaced_by());
}

TEST(Membership, MetadataRoundTripsAndMalformedIsRefused) {
  EXPECT_EQ(member_metadata({3, 12}), "3@12");
  const auto member = parse_member_metadata("3@12");
  ASSERT_TRUE(member);
  EXPECT_EQ(member->trainer, 3);
  EXPECT_EQ(member->incarnation, 12);
  for (const auto* bad : {"", "3", "@1", "3@", "3@1x", "-1@2", "3@-2"}) {
    EXPECT_FALSE(parse_member_metadata(bad)) << bad;
  }
}

// A synchronous job trains with the world it asked for: a trainer that never registered (its pod
// never scheduled) holds the first update; the push is answered "waiting" after the timeout, not
// applied, and goes through once the last trainer has joined.
TEST(ShardServer, SyncAndSspTakeNoUpdateBeforeEveryTrainerHasJoined) {
  for (const auto mode : {Mode::kSync, Mode::kSsp}) {
    ServedShard shard(mode, "", 1 << 20, /*timeout=*/1s);
    ASSERT_TRUE(shard.initialize().ok());
    ASSERT_TRUE(shard.register_trainer(0).ok());
    proto::ParamsReply reply;
    const auto waited = shard.push_pull(ServedShard::push(0, 0, 1, 2), &reply);
    EXPECT_EQ(waited.error_code(), grpc::StatusCode::UNAVAILABLE);
    EXPECT_TRUE(is_waiting_for_trainers(waited)) << waited.error_message();
    EXPECT_NE(waited.error_message().find("waiting for trainer 1 to join"), std::string::npos)
        << waited.error_message();
    EXPECT_EQ(shard.state().version(), 0);  // nothing applied, nobody dropped

    auto resent = std::async(std::launch::async, [&] {
      proto::ParamsReply r;
      return shard.push_pull(ServedShard::push(0, 0, 1, 2), &r);
    });
    std::this_thread::sleep_for(100ms);
    ASSERT_TRUE(shard.register_trainer(1).ok());  // the last trainer joins
    if (mode == Mode::kSync) {                    // the round needs trainer 1's gradient too
      ASSERT_TRUE(shard.push_pull(ServedShard::push(1, 0, 3, 4), &reply).ok());
    }
    EXPECT_TRUE(resent.get().ok());
    EXPECT_GE(shard.state().version(), 1);
  }
}

// A shard initialised mid-run (restored from a checkpoint) serves the trainers that are there.
TEST(ShardServer, AShardRestoredMidRunDoesNotWaitForTrainersToJoinAgain) {
  ServedShard shard(Mode::kSsp, "", 1 << 20, /*timeout=*/5s, /*staleness=*/10);
  ASSERT_TRUE(shard.initialize(kFingerprint, "sgd", /*version=*/7).ok());
  ASSERT_TRUE(shard.register_trainer(0).ok());
  proto::ParamsReply reply;
  ASSERT_TRUE(shard.push_pull(ServedShard::push(0, 7, 1, 1), &reply).ok());
  EXPECT_EQ(reply.version(), 8);
}

TEST(ShardServer, SspHoldsATrainerThatRunsTooFarAhead) {
  ServedShard shard(Mode::kSsp, "", 1 << 20, 10s, /*staleness=*/1);
  ASSERT_TRUE(shard.start().ok());
  proto::ParamsReply reply;
  ASSERT_TRUE(shard.push_pull(ServedShard::push(0, 0, 1, 1), &reply).ok());  // 1 ahead: fine
  auto ahead = std::async(std::launch::async, [&] {
    proto::ParamsReply r;
    return shard.push_pull(ServedShard::push(0, 1, 1, 1), &r);  // 2 ahead: waits
  });
  EXPECT_EQ(ahead.wait_for(300ms), std::future_status::timeout);
  ASSERT_TRUE(shard.push_pull(ServedShard::push(1, 0, 1, 1), &reply).ok());
  EXPECT_EQ(ahead.wait_for(2s), std::future_status::ready);
  EXPECT_TRUE(ahead.get().ok());
  EXPECT_EQ(shard.state().version(), 3);  // every push applied once
}

}  // namespace
}  // namespace cifar::ps

namespace cifar::ps {
namespace {

// A push that follows `plan` and says it trained `samples` samples whose indices sum to `sum`.
proto::PushRequest planned_push(int trainer, const proto::SyncPlan& plan, float g0, float g1,
                                int64_t samples = 0, int64_t sum = 0) {
  auto request = ServedShard::push(trainer, plan.version(), g0, g1);
  *request.mutable_plan() = plan;
  request.mutable_samples()->set_count(samples);
  request.mutable_samples()->set_index_sum(sum);
  return request;
}

// An elastic job's PS 0: each update takes the members when the one before it completed; a
// trainer that registers meanwhile is planned from the next, and learns its slot by waiting.
TEST(ElasticSync, EachUpdateTakesTheMembersOfItsPlanAndAJoinerComesInAtTheNext) {
  ServedShard shard(Mode::kSync);
  ASSERT_TRUE(shard.initialize_elastic(/*trainers=*/3, /*min_trainers=*/1).ok());
  // Nobody is a member yet: a pull says no plan.
  proto::ParamsReply reply;
  proto::PullRequest pull;
  pull.set_trainer(0);
  ASSERT_TRUE(shard.pull(pull, &reply).ok());
  EXPECT_EQ(reply.plan().id(), 0);

  ASSERT_TRUE(shard.register_trainer(0).ok());
  ASSERT_TRUE(shard.pull(pull, &reply).ok());
  const auto alone = reply.plan();
  EXPECT_EQ(alone.version(), 0);
  EXPECT_EQ(alone.size(), 1);
  EXPECT_EQ(alone.slot(), 0);
  // Update 1 with trainer 0 alone: applied at once, its samples in the reply.
  ASSERT_TRUE(shard.push_pull(planned_push(0, alone, 1, 2, 8, 28), &reply).ok());
  EXPECT_EQ(reply.version(), 1);
  EXPECT_FALSE(reply.redo());
  expect_params(reply.params(), {0, 1, 2, 3}, {3, 4, 5});
  EXPECT_EQ(reply.samples().count(), 8);
  EXPECT_EQ(reply.samples().index_sum(), 28);
  const auto next = reply.plan();
  EXPECT_EQ(next.version(), 1);
  EXPECT_GT(next.id(), alone.id());

  // Trainer 2 registers: update 2 was planned without it, so it waits for update 3's plan.
  ASSERT_TRUE(shard.register_trainer(2).ok());
  proto::ParamsReply joined;
  auto joining = std::async(std::launch::async, [&] {
    proto::PullRequest wait;
    wait.set_trainer(2);
    wait.set_wait_for_plan(true);
    return shard.pull(wait, &joined);
  });
  EXPECT_EQ(joining.wait_for(300ms), std::future_status::timeout);
  ASSERT_TRUE(shard.push_pull(planned_push(0, next, 1, 1), &reply).ok());
  EXPECT_EQ(reply.version(), 2);
  ASSERT_TRUE(joining.get().ok());
  EXPECT_EQ(joined.plan().version(), 2);
  EXPECT_EQ(joined.plan().size(), 2);
  EXPECT_EQ(joined.plan().slot(), 1);
  EXPECT_EQ(reply.plan().id(), joined.plan().id());
  EXPECT_EQ(reply.plan().slot(), 0);

  // Update 3 waits for both, and averages their gradients.
  proto::ParamsReply first;
  auto pending = std::async(std::launch::async, [&] {
    return shard.push_pull(planned_push(0, reply.plan(), 1, 1, 4, 6), &first);
  });
  EXPECT_EQ(pending.wait_for(300ms), std::future_status::timeout);
  proto::ParamsReply second;
  ASSERT_TRUE(shard.push_pull(planned_push(2, joined.plan(), 3, 3, 4, 22), &second).ok());
  ASSERT_TRUE(pending.get().ok());
  EXPECT_EQ(second.version(), 3);
  expect_params(second.params(), {-3, -2, -1, 0}, {0, 1, 2});  // the mean gradient 2
  EXPECT_EQ(second.samples().count(), 8);
  EXPECT_EQ(second.samples().index_sum(), 28);
}

// A planned trainer that leaves before its gradient came: the update is planned again without it,
// the gradient in is set aside, and its trainer computes the step again in its new place. A push
// of an old plan is told to redo too.
TEST(ElasticSync, APlannedTrainerThatLeavesMakesTheOthersRedoTheStepWithoutIt) {
  ServedShard shard(Mode::kSync);
  ASSERT_TRUE(shard.initialize_elastic(/*trainers=*/3, /*min_trainers=*/1).ok());
  ASSERT_TRUE(shard.register_trainer(0).ok());
  ASSERT_TRUE(shard.register_trainer(1).ok());
  proto::ParamsReply reply;
  proto::PullRequest pull;
  pull.set_trainer(0);
  ASSERT_TRUE(shard.pull(pull, &reply).ok());
  // Trainer 0 was planned alone as it registered (the minimum is 1); trainer 1 from update 2.
  auto plan = reply.plan();
  ASSERT_EQ(plan.size(), 1);
  ASSERT_TRUE(shard.push_pull(planned_push(0, plan, 0, 0), &reply).ok());
  plan = reply.plan();
  ASSERT_EQ(plan.size(), 2);

  proto::ParamsReply first;
  auto pending = std::async(std::launch::async, [&] {
    return shard.push_pull(planned_push(0, plan, 1, 2, 4, 6), &first);
  });
  EXPECT_EQ(pending.wait_for(300ms), std::future_status::timeout);  // waits for trainer 1
  ASSERT_TRUE(shard.leave(1).ok());
  ASSERT_TRUE(pending.get().ok());
  EXPECT_TRUE(first.redo());
  EXPECT_EQ(first.version(), 1);  // nothing applied
  expect_params(first.params(), {1, 2, 3, 4}, {5, 6, 7});
  EXPECT_EQ(first.plan().size(), 1);
  EXPECT_EQ(first.plan().slot(), 0);
  EXPECT_GT(first.plan().id(), plan.id());

  // A push of the old plan is set aside; one of the new plan is applied.
  ASSERT_TRUE(shard.push_pull(planned_push(0, plan, 1, 2), &reply).ok());
  EXPECT_TRUE(reply.redo());
  ASSERT_TRUE(shard.push_pull(planned_push(0, first.plan(), 1, 2, 8, 28), &reply).ok());
  EXPECT_FALSE(reply.redo());
  EXPECT_EQ(reply.version(), 2);
  expect_params(reply.params(), {0, 1, 2, 3}, {3, 4, 5});
  EXPECT_EQ(reply.samples().count(), 8);  // the redone step's, not the set-aside one's
}

// A planned trainer silent for the timeout is dropped, and the update planned again without it.
TEST(ElasticSync, ASilentPlannedTrainerIsDroppedAndTheUpdatePlannedAgain) {
  ServedShard shard(Mode::kSync, "", 1 << 20, /*timeout=*/400ms);
  ASSERT_TRUE(shard.initialize_elastic(/*trainers=*/2, /*min_trainers=*/1).ok());
  ASSERT_TRUE(shard.register_trainer(0).ok());
  ASSERT_TRUE(shard.register_trainer(1).ok());
  proto::ParamsReply reply;
  proto::PullRequest pull;
  pull.set_trainer(1);
  ASSERT_TRUE(shard.pull(pull, &reply).ok());
  ASSERT_TRUE(shard.push_pull(planned_push(0, reply.plan(), 0, 0), &reply).ok());
  const auto plan = reply.plan();
  ASSERT_EQ(plan.size(), 2);
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(shard.push_pull(planned_push(0, plan, 1, 2), &reply).ok());
  EXPECT_GE(std::chrono::steady_clock::now() - start, 400ms);
  EXPECT_TRUE(reply.redo());
  EXPECT_EQ(reply.plan().size(), 1);
  ASSERT_TRUE(shard.push_pull(planned_push(0, reply.plan(), 1, 2), &reply).ok());
  EXPECT_EQ(reply.version(), 2);
}

// Another shard takes each update's plan from the pushes (which come once PS 0 completed it):
// it completes the update with that plan's gradients.
TEST(ElasticSync, AnotherShardCompletesAnUpdateWithTheGradientsOfThePlanThePushesName) {
  ServedShard shard(Mode::kSync, "", 1 << 20, 5s, 1, /*stripes=*/2);
  shard.use_stripe("1");  // PS 0's second stripe: not the one that plans
  ASSERT_TRUE(shard.initialize_elastic(/*trainers=*/3, /*min_trainers=*/1).ok());
  for (const int t : {0, 1, 2}) ASSERT_TRUE(shard.register_trainer(t).ok());
  // A push that follows no plan is computed again, never collected.
  proto::ParamsReply unplanned;
  ASSERT_TRUE(shard.push_pull(planned_push(0, proto::SyncPlan(), 1, 2), &unplanned).ok());
  EXPECT_TRUE(unplanned.redo());
  EXPECT_EQ(unplanned.version(), 0);
  proto::SyncPlan plan;
  plan.set_id(10);
  plan.set_version(0);
  plan.set_size(2);
  proto::ParamsReply first;
  auto pending = std::async(std::launch::async,
                            [&] { return shard.push_pull(planned_push(0, plan, 1, 2), &first); });
  EXPECT_EQ(pending.wait_for(300ms), std::future_status::timeout);  // the plan's 2 gradients
  proto::ParamsReply second;
  ASSERT_TRUE(shard.push_pull(planned_push(2, plan, 3, 4), &second).ok());
  ASSERT_TRUE(pending.get().ok());
  EXPECT_FALSE(first.redo());
  EXPECT_EQ(second.version(), 1);
  expect_params(second.params(), {-1, 0, 1, 2}, {2, 3, 4});  // mean gradient 2 and 3
  auto next = plan;
  next.set_id(11);
  next.set_version(1);
  next.set_size(1);
  ASSERT_TRUE(shard.push_pull(planned_push(0, next, 1, 1), &second).ok());
  EXPECT_EQ(second.version(), 2);
}

// Fewer members than the minimum (or no master): no plan, and a trainer that waits for one is
// told so after the timeout, to wait again.
TEST(ElasticSync, NoPlanWithoutTheMasterAndTheMinimumAndAWaitForOneEndsAtTheTimeout) {
  ServedShard shard(Mode::kSync, "", 1 << 20, /*timeout=*/300ms);
  ASSERT_TRUE(shard.initialize_elastic(/*trainers=*/3, /*min_trainers=*/2).ok());
  ASSERT_TRUE(shard.register_trainer(0).ok());
  ASSERT_TRUE(shard.register_trainer(2).ok());
  proto::PullRequest waiting;
  waiting.set_trainer(1);
  waiting.set_wait_for_plan(true);
  proto::ParamsReply reply;
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(shard.pull(waiting, &reply).ok());
  EXPECT_GE(std::chrono::steady_clock::now() - start, 300ms);
  EXPECT_EQ(reply.plan().slot(), -1);  // planned without it: trainers 0 and 2
  EXPECT_EQ(reply.plan().size(), 2);
  ServedShard masterless(Mode::kSync, "", 1 << 20, /*timeout=*/300ms);
  ASSERT_TRUE(masterless.initialize_elastic(/*trainers=*/3, /*min_trainers=*/2).ok());
  ASSERT_TRUE(masterless.register_trainer(1).ok());
  ASSERT_TRUE(masterless.register_trainer(2).ok());
  waiting.set_trainer(2);
  ASSERT_TRUE(masterless.pull(waiting, &reply).ok());
  EXPECT_EQ(reply.plan().id(), 0);  // two members, but not the master
}

TEST(ElasticSync, AnInitialisationWithMoreMinimumThanTrainersIsRefused) {
  ServedShard shard(Mode::kSync);
  EXPECT_EQ(shard.initialize_elastic(/*trainers=*/2, /*min_trainers=*/3).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

}  // namespace
}  // namespace cifar::ps
