// Training in this process: the optimizer applies the gradients here, and the checkpoints hold
// the model and the optimizer's state. The all-reduce exchange builds on it.
#pragma once

#include <torch/optim/optimizer.h>

#include <memory>
#include <optional>
#include <string>

#include "config/train_config.h"
#include "train/checkpoint.h"
#include "train/exchange.h"

namespace cifar::train {

class LocalExchange : public GradientExchange {
 public:
  // Its checkpoints are written behind `fence` (the chief's, train/fence.h).
  LocalExchange(const TrainConfig& config, Fence fence);

  [[nodiscard]] TrainerPlace place() const override { return {}; }
  // Restores the newest checkpoint under --resume; refuses to train over one without it.
  TrainState start(const TrainableModel& model, const UpdatePlan& plan,
                   metrics::RuntimeMetrics& metrics) override;
  [[nodiscard]] std::string describe() const override { return "trained in this process"; }
  UpdateResult update(double lr, const SampleTally& trained) override;
  void save_checkpoint(const TrainState& state) override;
  [[nodiscard]] const CheckpointManager* checkpoints() const override { return &checkpoints_; }
  void finish(const TrainState& /*state*/) override {}

 protected:
  [[nodiscard]] const TrainConfig& config() const { return config_; }
  [[nodiscard]] const CheckpointManager& checkpoints_of_run() const { return checkpoints_; }
  // The optimizer over the model's parameters: start's first step.
  void prepare(const TrainableModel& model);
  // Continues from a checkpoint given as its file's bytes (CheckpointManager::load_bytes).
  TrainState resume_from_bytes(const std::string& bytes);
  // The model and the optimizer as they are now, at `state`, in a checkpoint's bytes.
  [[nodiscard]] std::string state_bytes(const TrainState& state) const;

 private:
  const TrainConfig& config_;
  CheckpointManager checkpoints_;
  std::shared_ptr<models::Classifier> model_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  int64_t step_ = 0;
};

}  // namespace cifar::train
