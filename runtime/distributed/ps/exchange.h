// The parameter-server exchange: a trainer (the master, which is the chief, or a worker) pushes
// each step's gradients to the PS shards, which apply them in the job's mode (shard.h), and pulls
// the parameters back in the same round trip. The version the shards count is the job's step.
// The chief initialises the shards (from its checkpoint or its model), writes the checkpoints
// from their gathered state, re-initialises a shard that lost its state, and ends the job.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "config/train_config.h"
#include "distributed/ps/shard.h"
#include "train/checkpoint.h"
#include "train/exchange.h"

namespace cifar::ps {

class PsClient;
struct JobState;

class ParameterServerExchange final : public train::GradientExchange {
 public:
  // The chief's checkpoints and done marker are written behind `fence` (train/fence.h).
  ParameterServerExchange(const train::TrainConfig& config, train::Fence fence);
  ~ParameterServerExchange() override;

  [[nodiscard]] train::TrainerPlace place() const override;
  // Sync: one update per batch of every trainer together; otherwise one per batch of each.
  [[nodiscard]] int64_t updates_per_epoch(int64_t batches) const override;
  [[nodiscard]] bool initializes_model() const override { return place().chief; }
  [[nodiscard]] bool evaluates() const override { return false; }  // the evaluator role's

  // Registers with every shard; the chief initialises those that are not yet (from the newest
  // checkpoint, or its model). Returns where the job stands: its version, in epochs and batches.
  train::TrainState start(const train::TrainableModel& model, const train::UpdatePlan& plan,
                          metrics::RuntimeMetrics& metrics) override;
  [[nodiscard]] std::string describe() const override;
  // Pushes the gradients, pulls the parameters (one round trip to all shards in parallel).
  train::UpdateResult update(double lr, const train::SampleTally& trained) override;
  // The chief, once a PS says it is stopping (its pod interrupted alone): that PS's state must be
  // saved now, and the PS that replaces it restores it.
  [[nodiscard]] bool wants_checkpoint() const override;
  // An elastic job's worker asked to stop leaves the job (its shards wait for it no more).
  bool agree_to_stop(bool asked) override;
  // Gathers the shards' parameters and optimizer state into one checkpoint.
  void save_checkpoint(const train::TrainState& state) override;
  [[nodiscard]] const train::CheckpointManager* checkpoints() const override {
    return &checkpoints_;
  }
  // The chief tells the shards the job is done and writes the done marker.
  void finish(const train::TrainState& state) override;

 private:
  class HostStaging;
  class Beat;
  [[nodiscard]] JobState current_state() const;
  [[nodiscard]] bool elastic() const;  // --min-trainers
  // An elastic synchronous job's: takes the next update's plan, and waits for one that holds
  // this trainer.
  void take_plan(const proto::SyncPlan& plan);
  [[nodiscard]] bool planned() const;  // an update's plan holds this trainer
  void wait_for_a_plan();

  const train::TrainConfig& config_;
  Mode mode_;
  train::CheckpointManager checkpoints_;
  std::shared_ptr<models::Classifier> model_;
  std::unique_ptr<HostStaging> staging_;
  std::unique_ptr<PsClient> client_;
  std::unique_ptr<Beat> beat_;  // an elastic synchronous job's; stops before the client goes
  int64_t total_updates_ = 0;
  int stripes_ = 0;
  int64_t version_ = 0;
  proto::SyncPlan plan_;  // an elastic synchronous job's current update's (size 0: none)
  // The step the newest checkpoint was saved under: the shards' lowest version when it was
  // gathered, which under async modes with several shards can trail the chief's step (the highest
  // version a push saw). The done marker names it, so that the evaluator waits for a checkpoint
  // that exists.
  int64_t saved_step_ = -1;
  bool shard_stopping_ = false;      // the last reply said a PS is stopping
  bool saved_for_stopping_ = false;  // and the chief has checkpointed since
};

}  // namespace cifar::ps
