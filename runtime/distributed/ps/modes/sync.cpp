// sync: every member's gradient for the version is summed; the last one in averages and applies
// them once, and every trainer of the round gets the same parameters. Equal to single-process
// training with the global batch. A member silent for --ps-timeout is dropped and the round
// goes on without it.
//
// An elastic job's updates follow plans (docs/ARCHITECTURE.md, "Elastic jobs"): PS 0's first
// stripe fixes the trainers of update v when update v-1 completes (the members then, if at least
// min_trainers), and tells each its slot in the reply; a trainer that registers meanwhile joins at
// the next update. A planned trainer lost before its gradient came (left, or silent for the
// timeout) makes a new plan for the same update: the gradients in are set aside and their trainers
// compute the step again in their new places, so that no sample of it is lost or counted twice.
// The other shards take each update's plan from the pushes, which come once PS 0 completed the
// update (client.cpp), and complete it when they hold that plan's gradients.
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "distributed/ps/shard_mode.h"

namespace cifar::ps {
namespace {

std::string trainer_list(const std::vector<int>& trainers) {
  std::string list;
  for (const int t : trainers) list += (list.empty() ? "" : ", ") + std::to_string(t);
  return list;
}

class SyncMode final : public ShardMode {
 public:
  static constexpr std::chrono::seconds kBeatCheck{1};

  void on_initialized(ShardCore& core) override {
    round_sum_ = torch::zeros({core.elements});
    round_arrived_.assign(static_cast<size_t>(core.trainers), false);
    reset_round();
    plan_ = {};
    // A plan's id: the milliseconds since the epoch at initialisation in the high bits, a count in
    // the low 20, so that the plans of a PS 0 that restarted are newer than any before.
    const auto now = std::chrono::system_clock::now().time_since_epoch();
    next_plan_id_ = std::chrono::duration_cast<std::chrono::milliseconds>(now).count() << 20;
    if (core.elastic() && core.plans()) plan_if_due(core);
  }

  void on_register(ShardCore& core, int /*trainer*/) override {
    if (core.elastic() && core.plans()) plan_if_due(core);
  }

  void on_leave(ShardCore& core, int trainer) override {
    if (!core.elastic() || !core.plans()) return;
    if (planned_now(core) && in_plan(trainer) && !arrived(trainer)) {
      replan(core, "trainer " + std::to_string(trainer) + " left");
    }
  }

  [[nodiscard]] proto::SyncPlan plan_for(const ShardCore& core, int trainer) const override {
    proto::SyncPlan plan;
    if (!core.elastic() || !core.plans() || plan_.version != core.version.load()) return plan;
    plan.set_id(plan_.id);
    plan.set_version(plan_.version);
    plan.set_size(static_cast<int32_t>(plan_.trainers.size()));
    const auto at = std::find(plan_.trainers.begin(), plan_.trainers.end(), trainer);
    plan.set_slot(at == plan_.trainers.end() ? -1
                                             : static_cast<int32_t>(at - plan_.trainers.begin()));
    return plan;
  }

  ShardStatus push_pull(ShardCore& core, const Push& push, ShardCore::Lock& lock,
                        ParamsSnapshot* reply) override {
    if (push.version != core.version.load()) {
      return ShardStatus::retry("gradient for version " + std::to_string(push.version) +
                                " but the shard is at " + std::to_string(core.version.load()) +
                                ": pull again");
    }
    if (!core.elastic()) return push_pull_fixed(core, push, lock, reply);
    if (core.plans()) return push_pull_planned(core, push, lock, reply);
    return push_pull_following(core, push, lock, reply);
  }

 private:
  struct Plan {
    int64_t id = 0;
    int64_t version = -1;
    std::vector<int> trainers;  // in slot order
  };

  // A fixed job: every member's gradient, or the round goes on without the silent ones.
  ShardStatus push_pull_fixed(ShardCore& core, const Push& push, ShardCore::Lock& lock,
                              ParamsSnapshot* reply) {
    add(push);
    const int64_t round_version = core.version.load();
    while (core.version.load() == round_version && !core.finished) {
      if (every_member_arrived(core)) {
        complete_round(core);
        break;
      }
      if (core.changed.wait_until(lock, round_started_ + core.options.timeout) ==
              std::cv_status::timeout &&
          core.version.load() == round_version) {
        // Explicit, logged and counted: the round goes on without the silent members.
        for (int m = 0; m < core.trainers; ++m) {
          if (core.is_member(m) && !arrived(m)) {
            core.evict(m,
                       "no gradient for " + std::to_string(core.options.timeout.count()) + " ms");
          }
        }
      }
    }
    answer(core, push, round_version, reply);
    return {};
  }

  // PS 0's first stripe of an elastic job: the plan's gradients, or a new plan without the lost.
  ShardStatus push_pull_planned(ShardCore& core, const Push& push, ShardCore::Lock& lock,
                                ParamsSnapshot* reply) {
    const int64_t round_version = core.version.load();
    if (!planned_now(core) && !core.changed.wait_for(lock, core.options.timeout, [&] {
          return planned_now(core) || core.finished;
        })) {
      return ShardStatus::waiting(
          "waiting for trainers to join: an update takes the master and at least " +
          std::to_string(core.min_trainers) + " trainers, " + std::to_string(core.member_count()) +
          " are members" + (core.is_member(0) ? "" : " (not the master)"));
    }
    if (core.finished || core.version.load() != round_version) {
      answer(core, push, round_version, reply);
      return {};
    }
    if (push.plan.id() != plan_.id || !in_plan(push.trainer)) {
      // Computed in another place than this update's plan gives it: computed again.
      answer(core, push, round_version, reply);
      return {};
    }
    add(push);
    const int64_t plan_id = plan_.id;
    while (core.version.load() == round_version && plan_.id == plan_id && !core.finished) {
      if (round_count_ == static_cast<int>(plan_.trainers.size())) {
        complete_round(core);
        break;
      }
      // Woken each second to look at the beats of the trainers not in yet.
      const auto deadline = round_started_ + core.options.timeout;
      core.changed.wait_until(lock, std::min(deadline, ShardCore::Clock::now() + kBeatCheck));
      if (core.version.load() != round_version || plan_.id != plan_id || core.finished) break;
      const auto now = ShardCore::Clock::now();
      std::vector<int> gone;
      for (const int m : plan_.trainers) {
        if (arrived(m)) continue;
        if (now >= deadline) {
          core.evict(m, "no gradient for " + std::to_string(core.options.timeout.count()) + " ms");
          gone.push_back(m);
        } else if (core.beat_silent(m, now)) {
          core.evict(m, "no beat for " + std::to_string(ShardCore::kBeatSilence.count()) +
                            " s (killed, frozen, or cut off)");
          gone.push_back(m);
        }
      }
      if (!gone.empty()) replan(core, "trainer " + trainer_list(gone) + " gone");
    }
    answer(core, push, round_version, reply);
    return {};
  }

  // Another shard of an elastic job: the gradients of the plan the pushes name. A plan's trainers
  // push here as soon as PS 0 completed the update with them, their gradients in hand, so all of
  // them come within moments unless one died (or froze) in between: after the beat silence (or the
  // timeout, if shorter) the update is applied with those that came, as a fixed job's would be,
  // and PS 0 drops the lost trainer by its beats.
  ShardStatus push_pull_following(ShardCore& core, const Push& push, ShardCore::Lock& lock,
                                  ParamsSnapshot* reply) {
    const int64_t round_version = core.version.load();
    if (push.plan.id() == 0 || push.plan.size() < 1 || push.plan.id() < round_plan_id_) {
      answer(core, push, round_version, reply);  // no plan, or an older one's: redo
      return {};
    }
    if (push.plan.id() > round_plan_id_) {
      follow(push.plan);
      core.changed.notify_all();
    }
    add(push);
    const int64_t plan_id = round_plan_id_;
    while (core.version.load() == round_version && round_plan_id_ == plan_id && !core.finished) {
      if (round_count_ >= round_size_) {
        complete_round(core);
        break;
      }
      const auto patience =
          std::min<std::chrono::milliseconds>(core.options.timeout, ShardCore::kBeatSilence);
      if (core.changed.wait_until(lock, round_started_ + patience) == std::cv_status::timeout &&
          core.version.load() == round_version && round_plan_id_ == plan_id) {
        spdlog::warn(
            "{}: update {} holds {} of its plan's {} gradients after {} ms (a trainer lost after "
            "its push to PS 0): applying those",
            core.name, round_version + 1, round_count_, round_size_, patience.count());
        complete_round(core);
      }
    }
    answer(core, push, round_version, reply);
    return {};
  }

  // The reply to a push made at `round_version`: the parameters, and where that round is not
  // done (its plan changed) that the step must be computed again.
  void answer(ShardCore& core, const Push& push, int64_t round_version, ParamsSnapshot* reply) {
    core.answer(push.trainer, push.reply_dtype, reply);
    reply->plan = plan_for(core, push.trainer);
    const bool completed = core.version.load() > round_version;
    reply->redo = core.elastic() && !completed && !core.finished;
    if (completed && core.plans()) reply->samples = last_samples_;
  }

  void add(const Push& push) {
    const auto slot = static_cast<size_t>(push.trainer);
    // A trainer that already pushed to this round is retrying: its gradient is in, it waits.
    if (round_arrived_[slot]) return;
    if (round_count_ == 0) {
      round_started_ = ShardCore::Clock::now();
      round_lr_ = push.learning_rate;
    }
    round_sum_.add_(push.grad);
    round_arrived_[slot] = true;
    ++round_count_;
    round_samples_.set_count(round_samples_.count() + push.samples.count());
    round_samples_.set_index_sum(round_samples_.index_sum() + push.samples.index_sum());
    round_samples_.set_index_square_sum(round_samples_.index_square_sum() +
                                        push.samples.index_square_sum());
  }

  [[nodiscard]] bool arrived(int trainer) const {
    return round_arrived_[static_cast<size_t>(trainer)];
  }

  [[nodiscard]] bool every_member_arrived(const ShardCore& core) const {
    for (int m = 0; m < core.trainers; ++m) {
      if (core.is_member(m) && !arrived(m)) return false;
    }
    return true;
  }

  void complete_round(ShardCore& core) {
    core.apply(round_sum_ / static_cast<double>(round_count_), core.version.load(), round_lr_);
    last_samples_ = round_samples_;
    reset_round();
    if (core.elastic() && core.plans()) plan_if_due(core);
    core.changed.notify_all();
  }

  void reset_round() {
    if (round_sum_.defined()) round_sum_.zero_();
    std::fill(round_arrived_.begin(), round_arrived_.end(), false);
    round_count_ = 0;
    round_samples_.Clear();
    round_started_ = ShardCore::Clock::now();
  }

  // Whether the current update has a plan with trainers (one without: too few are members).
  [[nodiscard]] bool planned_now(const ShardCore& core) const {
    return plan_.version == core.version.load() && !plan_.trainers.empty();
  }
  [[nodiscard]] bool in_plan(int trainer) const {
    return std::find(plan_.trainers.begin(), plan_.trainers.end(), trainer) != plan_.trainers.end();
  }

  // The members now, if at least min_trainers and the master (trainer 0) among them: the master
  // is not elastic, and as the job's chief it is in every update, so that it sees each update's
  // samples and holds each step it checkpoints.
  [[nodiscard]] std::vector<int> plannable(const ShardCore& core) const {
    std::vector<int> trainers;
    for (int t = 0; t < core.trainers; ++t) {
      if (core.is_member(t)) trainers.push_back(t);
    }
    if (static_cast<int>(trainers.size()) < core.min_trainers || !core.is_member(0)) {
      trainers.clear();
    }
    return trainers;
  }

  // Plans the current update if it has no plan yet and there are enough members.
  void plan_if_due(ShardCore& core) {
    if (planned_now(core)) return;
    auto trainers = plannable(core);
    if (trainers.empty()) return;
    if (trainers != plan_.trainers) {
      spdlog::info("{}: update {} and on: trainers {} ({})", core.name, core.version.load() + 1,
                   trainer_list(trainers), trainers.size());
    }
    plan_ = {++next_plan_id_, core.version.load(), std::move(trainers)};
    reset_round();
    core.changed.notify_all();
  }

  // The current update's plan lost a trainer: a new one from the members left (none while they
  // are fewer than min_trainers), and the gradients in are set aside.
  void replan(ShardCore& core, const std::string& why) {
    auto trainers = plannable(core);
    spdlog::warn(
        "{}: update {}: {}; {}", core.name, core.version.load() + 1, why,
        trainers.empty()
            ? "waiting for trainers to join (an update takes the master and at "
              "least " +
                  std::to_string(core.min_trainers) + ")"
            : "planned again with trainers " + trainer_list(trainers) + ", who compute it again");
    // A plan without trainers still has an id of its own: the other shards set the old plan's
    // gradients aside when they hear of it.
    plan_ = {++next_plan_id_, core.version.load(), std::move(trainers)};
    reset_round();
    core.changed.notify_all();
  }

  // Another shard: collects the update of `plan` from now on.
  void follow(const proto::SyncPlan& plan) {
    round_plan_id_ = plan.id();
    round_size_ = plan.size();
    reset_round();
  }

  torch::Tensor round_sum_;
  std::vector<bool> round_arrived_;
  int round_count_ = 0;
  double round_lr_ = 0;
  ShardCore::Clock::time_point round_started_;
  proto::Samples round_samples_;
  proto::Samples last_samples_;  // of the last update applied
  // PS 0's first stripe of an elastic job.
  Plan plan_;
  int64_t next_plan_id_ = 0;
  // The other shards of an elastic job: the plan of the update being collected.
  int64_t round_plan_id_ = 0;
  int round_size_ = 0;
};

}  // namespace

std::unique_ptr<ShardMode> make_sync_mode() { return std::make_unique<SyncMode>(); }

}  // namespace cifar::ps
