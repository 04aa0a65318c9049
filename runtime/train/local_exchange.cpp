#include "train/local_exchange.h"

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <stdexcept>

#include "models/model.h"
#include "train/optimizer.h"
#include "train/run_store.h"

namespace cifar::train {

LocalExchange::LocalExchange(const TrainConfig& config, Fence fence)
    : config_(config),
      checkpoints_(open_run_store(config), run_name(config), config.keep_checkpoints,
                   std::move(fence)) {}

void LocalExchange::prepare(const TrainableModel& model) {
  model_ = model.model;
  optimizer_ = make_optimizer(config_.optimizer, config_.schedule.base_lr, model.parameters);
}

TrainState LocalExchange::resume_from_bytes(const std::string& bytes) {
  const auto state = CheckpointManager::load_bytes(bytes, *model_, *optimizer_);
  step_ = state.step;
  return state;
}

std::string LocalExchange::state_bytes(const TrainState& state) const {
  return checkpoints_.to_bytes(*model_, *optimizer_, state);
}

TrainState LocalExchange::start(const TrainableModel& model, const UpdatePlan& /*plan*/,
                                metrics::RuntimeMetrics& /*metrics*/) {
  prepare(model);
  TrainState state;
  if (config_.resume) {
    if (auto restored = checkpoints_.load_latest(*model_, *optimizer_)) {
      state = *restored;
    } else {
      spdlog::info("no checkpoint in {}: starting from scratch", config_.model_dir);
    }
  } else if (!checkpoints_.list().empty()) {
    // Never overwrite a run's checkpoints silently.
    throw std::invalid_argument("model dir " + config_.model_dir +
                                " already holds checkpoints; pass --resume to continue that run "
                                "or choose another -md");
  }
  step_ = state.step;
  return state;
}

UpdateResult LocalExchange::update(double lr, const SampleTally& trained) {
  set_learning_rate(*optimizer_, lr);
  optimizer_->step();
  return {++step_, false, 0, trained};
}

void LocalExchange::save_checkpoint(const TrainState& state) {
  spdlog::debug("checkpoint {}", checkpoints_.save(*model_, *optimizer_, state));
}

}  // namespace cifar::train
