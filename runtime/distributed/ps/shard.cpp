#include "distributed/ps/shard.h"

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "distributed/ps/tensor_codec.h"
#include "metrics/runtime_metrics.h"

namespace cifar::ps {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kMaxTrainers = 4096;

grpc::Status invalid(const std::string& message) {
  return {grpc::StatusCode::INVALID_ARGUMENT, message};
}

train::OptimizerOptions optimizer_options(const proto::OptimizerConfig& c) {
  train::OptimizerOptions o;
  o.name = c.name();
  o.momentum = c.momentum();
  o.nesterov = c.nesterov();
  o.weight_decay = c.weight_decay();
  o.adam_beta1 = c.beta1();
  o.adam_beta2 = c.beta2();
  return o;
}

// What decides the layout (its fingerprint): the model and the shard count (layout.h).
constexpr const char* kSameLayoutHint =
    "start every process of the job with the same -m, -nc, dataset, --ps-count and --ps-stripes";

}  // namespace

grpc::Status not_initialized() {
  return {grpc::StatusCode::UNAVAILABLE,
          std::string(kNotInitialized) + ": the master has not sent the parameters yet"};
}

Mode parse_mode(const std::string& name) {
  if (name == "sync") return Mode::kSync;
  if (name == "async") return Mode::kAsync;
  if (name == "async-reply") return Mode::kAsyncReply;
  if (name == "hogwild") return Mode::kHogwild;
  if (name == "ssp") return Mode::kSsp;
  throw std::invalid_argument("unknown PS mode '" + name +
                              "' (sync, async, async-reply, hogwild, ssp)");
}

std::string mode_name(Mode mode) {
  switch (mode) {
    case Mode::kSync:
      return "sync";
    case Mode::kAsync:
      return "async";
    case Mode::kAsyncReply:
      return "async-reply";
    case Mode::kHogwild:
      return "hogwild";
    case Mode::kSsp:
      return "ssp";
  }
  return "?";
}

Shard::Shard(ShardOptions options, metrics::RuntimeMetrics* metrics)
    : options_(options),
      name_("shard " + std::to_string(options.index) +
            (options.stripe > 0 ? " stripe " + std::to_string(options.stripe) : "")),
      metrics_(metrics) {}

Shard::~Shard() {
  {
    const std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (applier_.joinable()) applier_.join();
}

bool Shard::done() const { return finished_.load() || version_.load() >= total_updates_; }

bool Shard::is_member(int trainer) const { return members_[static_cast<size_t>(trainer)].load(); }

int64_t Shard::member_count() const {
  int64_t n = 0;
  for (int t = 0; t < trainers_; ++t) n += is_member(t) ? 1 : 0;
  return n;
}

void Shard::set_member(int trainer, bool member) {
  members_[static_cast<size_t>(trainer)].store(member);
  publish_state();
}

void Shard::publish_state() {
  if (reports_progress()) metrics_->set_ps_state(version_.load(), member_count());
}

grpc::Status Shard::register_trainer(const proto::RegisterRequest& request,
                                     proto::RegisterReply* reply) {
  const Lock lock(mu_);
  reply->set_mode(mode_name(options_.mode));
  if (!initialized_) {
    reply->set_initialized(false);
    return grpc::Status::OK;
  }
  const int t = request.trainer();
  if (t < 0 || t >= trainers_) {
    return invalid("trainer " + std::to_string(t) + " is not in this job of " +
                   std::to_string(trainers_) + " trainers");
  }
  if (request.layout().fingerprint() != fingerprint_ ||
      request.layout().pieces() != piece_sizes_.size()) {
    return {grpc::StatusCode::FAILED_PRECONDITION,
            "trainer " + std::to_string(t) +
                " has another model layout than this shard: " + kSameLayoutHint};
  }
  if (options_.mode == Mode::kSsp) {
    // A (re)joining trainer starts level with the slowest member, so nobody waits for it.
    const int64_t slowest = slowest_clock(/*except=*/t);
    clocks_[static_cast<size_t>(t)] = slowest == std::numeric_limits<int64_t>::max() ? 0 : slowest;
  }
  if (!is_member(t)) {
    spdlog::info("{}: trainer {} rejoined at version {}", name_, t, version_.load());
  }
  set_member(t, true);
  reply->set_initialized(true);
  reply->set_version(version_.load());
  reply->set_total_updates(total_updates_);
  reply->set_done(done());
  return grpc::Status::OK;
}

grpc::Status Shard::initialize(const proto::InitRequest& request, proto::InitReply* reply) {
  const Lock lock(mu_);
  if (initialized_) {
    if (request.layout().fingerprint() != fingerprint_) {
      return {grpc::StatusCode::FAILED_PRECONDITION,
              std::string("shard already holds another model's parameters: ") + kSameLayoutHint};
    }
    reply->set_already_initialized(true);
    reply->set_version(version_.load());
    return grpc::Status::OK;
  }
  if (request.trainers() < 1 || request.trainers() > kMaxTrainers) {
    return invalid("trainers = " + std::to_string(request.trainers()) + " (1.." +
                   std::to_string(kMaxTrainers) + ")");
  }
  if (request.version() < 0 || request.total_updates() < 0) {
    return invalid("negative version or total_updates");
  }
  if (static_cast<uint32_t>(request.params_size()) != request.layout().pieces()) {
    return invalid(std::to_string(request.params_size()) + " parameter pieces, layout says " +
                   std::to_string(request.layout().pieces()));
  }
  std::vector<int64_t> sizes;
  std::vector<int64_t> offsets;
  std::vector<torch::Tensor> pieces;
  int64_t elements = 0;
  for (int k = 0; k < request.params_size(); ++k) {
    const auto& t = request.params(k);
    if (t.key() != static_cast<uint32_t>(k) || t.shape_size() != 1) {
      return invalid("params[" + std::to_string(k) + "]: key or shape out of order");
    }
    if (const auto why = check_piece(t, t.shape(0)); !why.empty()) {
      return invalid("params[" + std::to_string(k) + "]: " + why);
    }
    sizes.push_back(t.shape(0));
    offsets.push_back(elements);
    elements += t.shape(0);
    pieces.push_back(decode(t));
  }
  const auto flat = pieces.empty() ? torch::zeros({0}) : torch::cat(pieces);
  std::unique_ptr<ShardOptimizer> optimizer;
  try {
    optimizer = std::make_unique<ShardOptimizer>(optimizer_options(request.optimizer()),
                                                 std::vector<torch::Tensor>{flat});
  } catch (const std::invalid_argument& e) {
    return invalid(e.what());
  }
  const auto& slots = optimizer->slot_names();
  if (request.slots_size() != 0) {
    if (static_cast<size_t>(request.slots_size()) != slots.size() * sizes.size()) {
      return invalid("optimizer state has " + std::to_string(request.slots_size()) +
                     " tensors, expected " + std::to_string(slots.size() * sizes.size()));
    }
    for (const auto& t : request.slots()) {
      const auto slot = std::find(slots.begin(), slots.end(), t.slot()) - slots.begin();
      if (static_cast<size_t>(slot) == slots.size() || t.key() >= sizes.size()) {
        return invalid("unknown optimizer state '" + t.slot() + "' for piece " +
                       std::to_string(t.key()));
      }
      if (const auto why = check_piece(t, sizes[t.key()]); !why.empty()) {
        return invalid("optimizer state " + t.slot() + ": " + why);
      }
      optimizer->slot(static_cast<size_t>(slot), 0)
          .narrow(0, offsets[t.key()], sizes[t.key()])
          .copy_(decode(t));
    }
    optimizer->set_steps(request.optimizer_steps());
  }

  fingerprint_ = request.layout().fingerprint();
  trainers_ = request.trainers();
  total_updates_ = request.total_updates();
  piece_sizes_ = std::move(sizes);
  piece_offsets_ = std::move(offsets);
  last_snapshot_ = {};
  optimizer_ = std::move(optimizer);
  members_ = std::make_unique<std::atomic<bool>[]>(static_cast<size_t>(trainers_));
  // Every trainer of the job is expected from the start, so the first sync round waits for all
  // of them (one that never comes is dropped after the timeout like one that died).
  for (int t = 0; t < trainers_; ++t) members_[static_cast<size_t>(t)].store(true);
  told_done_.assign(static_cast<size_t>(trainers_), false);
  round_arrived_.assign(static_cast<size_t>(trainers_), false);
  clocks_.assign(static_cast<size_t>(trainers_), 0);
  round_sum_ = torch::zeros_like(flat);
  version_.store(request.version());
  initialized_.store(true);
  // A PS holds stripes it may never use (layout.h): only a used one gets an applier thread.
  if (options_.mode == Mode::kAsyncReply) applier_ = std::thread([this] { run_applier(); });
  spdlog::info("{}: initialized with {} pieces ({} parameters) at version {} of {}, mode {}", name_,
               piece_sizes_.size(), elements, version_.load(), total_updates_,
               mode_name(options_.mode));
  publish_state();
  reply->set_already_initialized(false);
  reply->set_version(version_.load());
  changed_.notify_all();
  return grpc::Status::OK;
}

grpc::Status Shard::check_push(const Push& push) const {
  if (!initialized_) return not_initialized();
  const int t = push.trainer;
  if (t < 0 || t >= trainers_) {
    return invalid("trainer " + std::to_string(t) + " is not in this job of " +
                   std::to_string(trainers_) + " trainers");
  }
  if (!is_member(t)) {
    return {
        grpc::StatusCode::ABORTED,
        "trainer " + std::to_string(t) +
            " is not a member (never registered, or dropped after --ps-timeout): register again"};
  }
  if (!std::isfinite(push.learning_rate) || push.learning_rate < 0) {
    return invalid("learning rate " + std::to_string(push.learning_rate));
  }
  if (push.version < 0) return invalid("negative gradient version");
  if (push.version > version_.load()) {
    // The shard went back to a checkpoint (restarted): the trainer must pull again.
    return {grpc::StatusCode::ABORTED, "gradient version " + std::to_string(push.version) +
                                           " is ahead of the shard's " +
                                           std::to_string(version_.load()) + ": pull again"};
  }
  if (!push.grad.defined() || push.grad.numel() != round_sum_.numel()) {
    return invalid("the gradient does not cover the shard's pieces");
  }
  return grpc::Status::OK;
}

void Shard::apply(const torch::Tensor& grad, int64_t grad_version, double lr) {
  const int64_t staleness = std::max<int64_t>(0, version_.load() - grad_version);
  // Staleness-aware SGD (Zhang et al., 2016): a gradient k updates old counts 1/k as much.
  const double rate =
      options_.staleness_lr && staleness > 1 ? lr / static_cast<double>(staleness) : lr;
  // Hogwild writes in place by design; every other mode updates under mu_ and replaces the
  // tensors, so replies still being sent keep the parameters they were given.
  const auto write = options_.mode == Mode::kHogwild ? ShardOptimizer::Write::kInPlace
                                                     : ShardOptimizer::Write::kOutOfPlace;
  optimizer_->apply(0, grad, rate, write);
  version_.fetch_add(1);
  if (reports_progress()) {
    metrics_->record_ps_update(staleness);
    publish_state();
  }
}

ParamsSnapshot Shard::snapshot(proto::DType dtype) {
  if (dtype == proto::DTYPE_UNSPECIFIED) dtype = proto::FLOAT32;
  const int64_t version = version_.load();
  const bool reusable = options_.mode != Mode::kHogwild && last_snapshot_.values.defined() &&
                        last_snapshot_.version == version && last_snapshot_.dtype == dtype;
  ParamsSnapshot snap;
  if (reusable) {
    snap = last_snapshot_;
  } else {
    snap.version = version;
    snap.dtype = dtype;
    const auto& params = optimizer_->params().front();
    // Hogwild's parameters change under the reply, so it gets a copy (possibly mid-update).
    const bool shareable = options_.mode != Mode::kHogwild && dtype == proto::FLOAT32;
    snap.values = shareable ? params : to_wire(params, dtype);
    snap.piece_sizes = piece_sizes_;
    if (options_.mode != Mode::kHogwild) last_snapshot_ = snap;
  }
  snap.done = done();
  if (metrics_ != nullptr)
    metrics_->record_ps_traffic(0, static_cast<int64_t>(snap.values.nbytes()));
  return snap;
}

void to_proto(const ParamsSnapshot& snapshot, proto::ParamsReply* reply) {
  reply->set_version(snapshot.version);
  reply->set_done(snapshot.done);
  const auto wire = snapshot.values.to(torch::kFloat32);
  int64_t offset = 0;
  for (size_t k = 0; k < snapshot.piece_sizes.size(); ++k) {
    auto* t = reply->add_params();
    t->set_key(static_cast<uint32_t>(k));
    encode(wire.narrow(0, offset, snapshot.piece_sizes[k]), snapshot.dtype, t);
    offset += snapshot.piece_sizes[k];
  }
}

void Shard::note_told(int trainer, const ParamsSnapshot& reply) {
  if (!reply.done) return;
  told_done_[static_cast<size_t>(trainer)] = true;
  changed_.notify_all();
}

void Shard::evict(int trainer, const std::string& why) {
  spdlog::warn("{}: trainer {} dropped at version {}: {}; it rejoins when it registers again",
               name_, trainer, version_.load(), why);
  set_member(trainer, false);
  if (reports_progress()) metrics_->record_ps_eviction();
}

void Shard::complete_round(Lock& /*held*/) {
  apply(round_sum_ / static_cast<double>(round_count_), version_.load(), round_lr_);
  round_sum_.zero_();
  std::fill(round_arrived_.begin(), round_arrived_.end(), false);
  round_count_ = 0;
  changed_.notify_all();
}

int64_t Shard::slowest_clock(int except) const {
  int64_t slowest = std::numeric_limits<int64_t>::max();
  for (int t = 0; t < trainers_; ++t) {
    if (t != except && is_member(t)) slowest = std::min(slowest, clocks_[static_cast<size_t>(t)]);
  }
  return slowest;
}

grpc::Status Shard::push_pull(const Push& push, ParamsSnapshot* reply) {
  if (metrics_ != nullptr) metrics_->record_ps_traffic(push.wire_bytes, 0);
  const int t = push.trainer;
  const auto dtype = push.reply_dtype;

  if (options_.mode == Mode::kHogwild) {
    // Lock-free: concurrent pushes update the same memory, readers may see a mix.
    if (auto status = check_push(push); !status.ok()) return status;
    if (!done()) apply(push.grad, push.version, push.learning_rate);
    *reply = snapshot(dtype);  // copied as they are, possibly mid-update
    if (reply->done) {
      const Lock lock(mu_);
      note_told(t, *reply);
    }
    return grpc::Status::OK;
  }

  Lock lock(mu_);
  if (auto status = check_push(push); !status.ok()) return status;
  if (done()) {
    *reply = snapshot(dtype);
    note_told(t, *reply);
    return grpc::Status::OK;
  }

  switch (options_.mode) {
    case Mode::kSync: {
      if (push.version != version_.load()) {
        return {grpc::StatusCode::ABORTED, "gradient for version " + std::to_string(push.version) +
                                               " but the shard is at " +
                                               std::to_string(version_.load()) + ": pull again"};
      }
      const auto slot = static_cast<size_t>(t);
      // A trainer that already pushed to this round is retrying: its gradient is in, it waits.
      if (!round_arrived_[slot]) {
        if (round_count_ == 0) {
          round_started_ = Clock::now();
          round_lr_ = push.learning_rate;
        }
        round_sum_.add_(push.grad);
        round_arrived_[slot] = true;
        ++round_count_;
      }
      const int64_t round_version = version_.load();
      auto round_complete = [&] {
        for (int m = 0; m < trainers_; ++m) {
          if (is_member(m) && !round_arrived_[static_cast<size_t>(m)]) return false;
        }
        return true;
      };
      while (version_.load() == round_version && !finished_) {
        if (round_complete()) {
          complete_round(lock);
          break;
        }
        if (changed_.wait_until(lock, round_started_ + options_.timeout) ==
                std::cv_status::timeout &&
            version_.load() == round_version) {
          // Explicit, logged and counted: the round goes on without the silent members.
          for (int m = 0; m < trainers_; ++m) {
            if (is_member(m) && !round_arrived_[static_cast<size_t>(m)]) {
              evict(m, "no gradient for " + std::to_string(options_.timeout.count()) + " ms");
            }
          }
        }
      }
      break;
    }
    case Mode::kAsync:
      apply(push.grad, push.version, push.learning_rate);
      break;
    case Mode::kAsyncReply: {
      // Backpressure: a bounded queue, so a slow applier cannot grow memory without limit.
      const auto max_pending = static_cast<size_t>(std::max(2, trainers_));
      changed_.wait(lock, [&] { return pending_.size() < max_pending || stopping_; });
      *reply = snapshot(dtype);
      note_told(t, *reply);
      // The gradient is the push's own tensor (received into it, not into gRPC's buffers).
      pending_.push_back({t, push.version, push.learning_rate, push.grad});
      changed_.notify_all();
      return grpc::Status::OK;
    }
    case Mode::kSsp: {
      apply(push.grad, push.version, push.learning_rate);
      auto& clock = clocks_[static_cast<size_t>(t)];
      ++clock;
      changed_.notify_all();
      const auto deadline = Clock::now() + options_.timeout;
      while (!done() && is_member(t) && clock - slowest_clock() > options_.staleness) {
        if (changed_.wait_until(lock, deadline) == std::cv_status::timeout) {
          const int64_t slowest = slowest_clock();
          for (int m = 0; m < trainers_; ++m) {
            if (m != t && is_member(m) && clocks_[static_cast<size_t>(m)] == slowest) {
              evict(m, "more than " + std::to_string(options_.staleness) + " updates behind for " +
                           std::to_string(options_.timeout.count()) + " ms");
            }
          }
        }
      }
      break;
    }
    case Mode::kHogwild:
      break;  // handled above
  }
  *reply = snapshot(dtype);
  note_told(t, *reply);
  return grpc::Status::OK;
}

void Shard::run_applier() {
  Lock lock(mu_);
  while (true) {
    changed_.wait(lock, [&] { return stopping_ || !pending_.empty(); });
    if (pending_.empty()) return;  // stopping
    const auto update = std::move(pending_.front());
    pending_.pop_front();
    if (!done()) apply(update.grad, update.version, update.lr);
    changed_.notify_all();
  }
}

grpc::Status Shard::pull(const proto::PullRequest& request, ParamsSnapshot* reply) {
  if (!initialized_) return not_initialized();
  if (request.trainer() < 0 || request.trainer() >= trainers_) {
    return invalid("trainer " + std::to_string(request.trainer()) + " is not in this job");
  }
  const Lock lock(mu_);
  *reply = snapshot(request.reply_dtype());
  note_told(request.trainer(), *reply);
  return grpc::Status::OK;
}

grpc::Status Shard::get_state(proto::StateReply* reply) {
  if (!initialized_) return not_initialized();
  const Lock lock(mu_);
  reply->set_version(version_.load());
  const auto& params = optimizer_->params().front();
  for (size_t k = 0; k < piece_sizes_.size(); ++k) {
    const auto piece = [&](const torch::Tensor& flat) {
      return flat.narrow(0, piece_offsets_[k], piece_sizes_[k]);
    };
    auto* t = reply->add_params();
    t->set_key(static_cast<uint32_t>(k));
    encode(piece(params), proto::FLOAT32, t);
    for (size_t s = 0; s < optimizer_->slot_names().size(); ++s) {
      auto* slot = reply->add_slots();
      slot->set_key(static_cast<uint32_t>(k));
      slot->set_slot(optimizer_->slot_names()[s]);
      encode(piece(optimizer_->slot(s, 0)), proto::FLOAT32, slot);
    }
  }
  reply->set_optimizer_steps(optimizer_->steps(0));
  return grpc::Status::OK;
}

void Shard::finish() {
  const Lock lock(mu_);
  if (!finished_.exchange(true)) {
    finished_at_ = Clock::now();
    spdlog::info("{}: the master finished the job at version {}", name_, version_.load());
  }
  changed_.notify_all();
}

void Shard::wait_until_finished(std::chrono::milliseconds grace) {
  Lock lock(mu_);
  changed_.wait(lock, [&] { return finished_.load(); });
  auto everyone_told = [&] {
    for (int t = 0; t < trainers_; ++t) {
      if (is_member(t) && !told_done_[static_cast<size_t>(t)]) return false;
    }
    return true;
  };
  if (!changed_.wait_until(lock, finished_at_ + grace, everyone_told)) {
    spdlog::warn(
        "{}: not every trainer has heard that the job is done after {} ms; "
        "stopping anyway",
        name_, grace.count());
  }
}

}  // namespace cifar::ps
