#include "distributed/ps/shard.h"

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "distributed/ps/shard_mode.h"
#include "distributed/ps/tensor_codec.h"
#include "metrics/runtime_metrics.h"

namespace cifar::ps {
namespace {

constexpr int kMaxTrainers = 4096;

ShardStatus invalid(std::string message) { return ShardStatus::invalid(std::move(message)); }

train::OptimizerOptions optimizer_options(const proto::OptimizerConfig& c) {
  train::OptimizerOptions o;
  o.kind = contract::parse_named(train::kOptimizerNames, c.name(), "optimizer");
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

ShardStatus Shard::register_trainer(const proto::RegisterRequest& request,
                                    proto::RegisterReply* reply) {
  const ShardCore::Lock lock(core_.mu);
  reply->set_mode(mode_name(core_.options.mode));
  if (!core_.initialized) {
    reply->set_initialized(false);
    return {};
  }
  const int t = request.trainer();
  if (t < 0 || t >= core_.trainers) {
    return invalid("trainer " + std::to_string(t) + " is not in this job of " +
                   std::to_string(core_.trainers) + " trainers");
  }
  if (request.layout().fingerprint() != core_.fingerprint ||
      request.layout().pieces() != core_.piece_sizes.size()) {
    return ShardStatus::wrong_job("trainer " + std::to_string(t) +
                                  " has another model layout than this shard: " + kSameLayoutHint);
  }
  if (request.total_updates() > 0 && request.total_updates() != core_.total_updates.load()) {
    spdlog::info("{}: the master's plan ends at {} updates (this shard had {})", core_.name,
                 request.total_updates(), core_.total_updates.load());
    core_.total_updates.store(request.total_updates());
    core_.changed.notify_all();
  }
  if (!core_.joined[static_cast<size_t>(t)]) {
    core_.joined[static_cast<size_t>(t)] = true;
    core_.changed.notify_all();
  }
  if (!core_.is_member(t)) {
    spdlog::info("{}: trainer {} {} at version {}", core_.name, t,
                 core_.elastic() ? "joined" : "rejoined", core_.version.load());
  }
  core_.set_member(t, true);
  mode_->on_register(core_, t);
  reply->set_initialized(true);
  reply->set_version(core_.version.load());
  reply->set_total_updates(core_.total_updates.load());
  reply->set_done(core_.done());
  return {};
}

ShardStatus Shard::initialize(const proto::InitRequest& request, proto::InitReply* reply) {
  const ShardCore::Lock lock(core_.mu);
  if (core_.initialized) {
    if (request.layout().fingerprint() != core_.fingerprint) {
      return ShardStatus::wrong_job(
          std::string("shard already holds another model's parameters: ") + kSameLayoutHint);
    }
    reply->set_already_initialized(true);
    reply->set_version(core_.version.load());
    return {};
  }
  if (request.trainers() < 1 || request.trainers() > kMaxTrainers) {
    return invalid("trainers = " + std::to_string(request.trainers()) + " (1.." +
                   std::to_string(kMaxTrainers) + ")");
  }
  if (request.min_trainers() < 0 || request.min_trainers() > request.trainers()) {
    return invalid("min_trainers = " + std::to_string(request.min_trainers()) + " (0.." +
                   std::to_string(request.trainers()) + ")");
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

  core_.fingerprint = request.layout().fingerprint();
  core_.trainers = request.trainers();
  core_.total_updates.store(request.total_updates());
  core_.piece_sizes = std::move(sizes);
  core_.piece_offsets = std::move(offsets);
  core_.last_snapshot = {};
  core_.optimizer = std::move(optimizer);
  core_.min_trainers = request.min_trainers();
  core_.members = std::make_unique<std::atomic<bool>[]>(static_cast<size_t>(core_.trainers));
  // Every trainer of a fixed job is a member from the start: the synchronous modes wait for all
  // of them to join (wait_for_every_trainer) before the first update. An elastic job's trainers
  // become members as they register.
  for (int t = 0; t < core_.trainers; ++t) {
    core_.members[static_cast<size_t>(t)].store(!core_.elastic());
  }
  core_.told_done.assign(static_cast<size_t>(core_.trainers), false);
  core_.last_beat.assign(static_cast<size_t>(core_.trainers), ShardCore::Clock::time_point{});
  // A fresh start waits for every trainer to register; a shard initialised mid-run (restored, or
  // re-initialised by the master) serves the trainers that are there, as before it went.
  core_.joined.assign(static_cast<size_t>(core_.trainers),
                      !core_.elastic() && request.version() > 0);
  core_.elements = elements;
  core_.version.store(request.version());
  mode_->on_initialized(core_);
  core_.initialized.store(true);
  spdlog::info("{}: initialized with {} pieces ({} parameters) at version {} of {}, mode {}",
               core_.name, core_.piece_sizes.size(), elements, core_.version.load(),
               core_.total_updates.load(), mode_name(core_.options.mode));
  core_.publish_state();
  for (int t = 0; t < core_.trainers; ++t) core_.publish_trainer(t);
  reply->set_already_initialized(false);
  reply->set_version(core_.version.load());
  core_.changed.notify_all();
  return {};
}

ShardStatus Shard::check_push(const Push& push) const {
  if (!core_.initialized) return ShardStatus::not_initialized();
  const int t = push.trainer;
  if (t < 0 || t >= core_.trainers) {
    return invalid("trainer " + std::to_string(t) + " is not in this job of " +
                   std::to_string(core_.trainers) + " trainers");
  }
  if (!core_.is_member(t)) {
    return ShardStatus::retry(
        "trainer " + std::to_string(t) +
        " is not a member (never registered, or dropped after --ps-timeout): register again");
  }
  if (!std::isfinite(push.learning_rate) || push.learning_rate < 0) {
    return invalid("learning rate " + std::to_string(push.learning_rate));
  }
  if (push.version < 0) return invalid("negative gradient version");
  if (push.version > core_.version.load()) {
    // The shard went back to a checkpoint (restarted): the trainer must pull again.
    return ShardStatus::retry("gradient version " + std::to_string(push.version) +
                              " is ahead of the shard's " + std::to_string(core_.version.load()) +
                              ": pull again");
  }
  if (!push.grad.defined() || push.grad.numel() != core_.elements) {
    return invalid("the gradient does not cover the shard's pieces");
  }
  return {};
}

ShardStatus Shard::pull(const proto::PullRequest& request, ParamsSnapshot* reply) {
  if (!core_.initialized) return ShardStatus::not_initialized();
  if (request.trainer() < 0 || request.trainer() >= core_.trainers) {
    return invalid("trainer " + std::to_string(request.trainer()) + " is not in this job");
  }
  ShardCore::Lock lock(core_.mu);
  if (request.wait_for_plan() && core_.plans()) {
    // A joining trainer of an elastic synchronous job: until an update's plan holds it.
    core_.changed.wait_for(lock, core_.options.timeout, [&] {
      const auto plan = mode_->plan_for(core_, request.trainer());
      return core_.finished || places_its_trainer(plan);
    });
  } else if (request.at_least_version() > 0) {
    core_.changed.wait_for(lock, core_.options.timeout, [&] {
      return core_.finished || core_.version.load() >= request.at_least_version();
    });
  }
  core_.answer(request.trainer(), request.reply_dtype(), reply);
  reply->plan = mode_->plan_for(core_, request.trainer());
  return {};
}

ShardStatus Shard::beat(int trainer) {
  if (!core_.initialized) return ShardStatus::not_initialized();
  if (trainer < 0 || trainer >= core_.trainers) {
    return invalid("trainer " + std::to_string(trainer) + " is not in this job");
  }
  const ShardCore::Lock lock(core_.mu);
  core_.last_beat[static_cast<size_t>(trainer)] = ShardCore::Clock::now();
  return {};
}

ShardStatus Shard::leave(const proto::LeaveRequest& request) {
  if (!core_.initialized) return ShardStatus::not_initialized();
  const int t = request.trainer();
  if (t < 0 || t >= core_.trainers) {
    return invalid("trainer " + std::to_string(t) + " is not in this job");
  }
  const ShardCore::Lock lock(core_.mu);
  if (!core_.is_member(t)) return {};
  spdlog::info("{}: trainer {} left at version {}", core_.name, t, core_.version.load());
  core_.joined[static_cast<size_t>(t)] = false;
  core_.set_member(t, false);
  if (core_.reports_progress()) core_.metrics->forget_ps_trainer(t);
  mode_->on_leave(core_, t);
  core_.changed.notify_all();
  return {};
}

ShardStatus Shard::get_state(proto::StateReply* reply) {
  if (!core_.initialized) return ShardStatus::not_initialized();
  const ShardCore::Lock lock(core_.mu);
  const auto version = core_.version.load();
  reply->set_version(version);
  const auto& params = core_.optimizer->params().front();
  for (size_t k = 0; k < core_.piece_sizes.size(); ++k) {
    const auto piece = [&](const torch::Tensor& flat) {
      return flat.narrow(0, core_.piece_offsets[k], core_.piece_sizes[k]);
    };
    auto* t = reply->add_params();
    t->set_key(static_cast<uint32_t>(k));
    encode(piece(params), proto::FLOAT32, t);
    for (size_t s = 0; s < core_.optimizer->slot_names().size(); ++s) {
      auto* slot = reply->add_slots();
      slot->set_key(static_cast<uint32_t>(k));
      slot->set_slot(core_.optimizer->slot_names()[s]);
      encode(piece(core_.optimizer->slot(s, 0)), proto::FLOAT32, slot);
    }
  }
  reply->set_optimizer_steps(core_.optimizer->steps(0));
  gathered_version_.store(version);
  return {};
}

void Shard::finish() {
  const ShardCore::Lock lock(core_.mu);
  if (!core_.finished.exchange(true)) {
    core_.finished_at = ShardCore::Clock::now();
    spdlog::info("{}: the master finished the job at version {}", core_.name, core_.version.load());
  }
  core_.changed.notify_all();
}

void Shard::wait_until_finished(std::chrono::milliseconds grace) {
  ShardCore::Lock lock(core_.mu);
  core_.changed.wait(lock, [&] { return core_.finished.load(); });
  auto everyone_told = [&] {
    for (int t = 0; t < core_.trainers; ++t) {
      if (core_.is_member(t) && !core_.told_done[static_cast<size_t>(t)]) return false;
    }
    return true;
  };
  if (!core_.changed.wait_until(lock, core_.finished_at + grace, everyone_told)) {
    spdlog::warn(
        "{}: not every trainer has heard that the job is done after {} ms; "
        "stopping anyway",
        core_.name, grace.count());
  }
}

Shard::Shard(ShardOptions options, metrics::RuntimeMetrics* metrics)
    : mode_(make_shard_mode(options.mode)), core_(options, metrics, mode_->lock_free()) {}

Shard::~Shard() { mode_->stop(core_); }

ShardStatus Shard::wait_for_every_trainer(ShardCore::Lock& lock) {
  const auto mode = core_.options.mode;
  // Async modes start with who is there; an elastic job's sync updates wait for their plans'.
  if ((mode != Mode::kSync && mode != Mode::kSsp) || core_.elastic()) return {};
  const auto all_joined = [&] { return core_.not_joined().empty() || core_.finished; };
  if (core_.changed.wait_for(lock, core_.options.timeout, all_joined)) return {};
  std::string missing;
  for (const int t : core_.not_joined())
    missing += (missing.empty() ? "" : ", ") + std::to_string(t);
  const auto message = "waiting for trainer " + missing +
                       " to join: a synchronous job takes its first update with every trainer it "
                       "names";
  if (!said_waiting_) spdlog::info("{}: {}", core_.name, message);
  said_waiting_ = true;
  return ShardStatus::waiting(message);
}

ShardStatus Shard::push_pull(const Push& push, ParamsSnapshot* reply) {
  if (core_.metrics != nullptr) core_.metrics->record_ps_traffic(push.wire_bytes, 0);
  // A NaN or infinite gradient would poison every trainer's parameters: refused before the lock,
  // the shard's state untouched.
  if (push.grad.defined() && !torch::isfinite(push.grad).all().item<bool>()) {
    return invalid(
        "the gradient holds NaN or infinite values (a diverged trainer: lower the learning rate)");
  }
  ShardCore::Lock lock(core_.mu, std::defer_lock);
  if (!mode_->lock_free()) lock.lock();
  if (auto status = check_push(push); !status.ok()) return status;
  if (core_.done()) {
    *reply = core_.snapshot(push.reply_dtype);
    if (!lock.owns_lock()) lock.lock();
    core_.note_told(push.trainer, *reply);
    return {};
  }
  if (auto status = wait_for_every_trainer(lock); !status.ok()) return status;
  return mode_->push_pull(core_, push, lock, reply);
}

}  // namespace cifar::ps
