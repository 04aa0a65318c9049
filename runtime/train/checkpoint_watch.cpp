#include "train/checkpoint_watch.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "metrics/runtime_metrics.h"
#include "storage/s3_client.h"
#include "storage/store.h"
#include "train/error_text.h"
#include "train/fence.h"
#include "train/run_store.h"

namespace cifar::train {

CheckpointWatch::CheckpointWatch(std::shared_ptr<storage::Store> store, const TrainConfig& config,
                                 metrics::RuntimeMetrics& metrics)
    : store_(std::move(store)),
      config_(config),
      metrics_(metrics),
      checkpoints_(store_, run_name(config), config.keep_checkpoints) {}

std::optional<CheckpointWatch::Loaded> CheckpointWatch::next(torch::nn::Module& model,
                                                             int64_t after) {
  while (true) {  // again at once only after a checkpoint passed over: the next one is listed
    auto names = checkpoints_.list();
    names.erase(std::remove_if(names.begin(), names.end(),
                               [&](const std::string& n) { return stale_.count(n) != 0; }),
                names.end());
    if (names.empty() || names.back() <= newest_fetched_ || unreadable_.count(names.back()) != 0) {
      return std::nullopt;
    }
    const auto newest = names.back();
    auto bytes = checkpoints_.read(newest);
    if (!bytes) {  // rotated away by the chief between listing and reading: a newer one is there
      spdlog::debug("evaluator: {} is gone", newest);
      continue;
    }
    newest_fetched_ = newest;
    // Only parsing the object decides whether it is unreadable; the store failing to answer, or
    // this pod being replaced, is an error of its own.
    try {
      const auto state = CheckpointManager::state_from_bytes(*bytes);
      if (is_stale_checkpoint(read_fence(*store_, config_, FenceSlot::kChief), state.written_by,
                              state.step)) {
        stale_.insert(newest);
        spdlog::warn(
            "evaluator: ignoring {}: written by incarnation {} of the chief after a newer one "
            "took over",
            checkpoints_.location_of(newest), state.written_by);
        continue;
      }
      if (state.step <= after) return std::nullopt;
      CheckpointManager::model_from_bytes(*bytes, model);
      return Loaded{state, std::move(*bytes)};
    } catch (const Replaced&) {
      throw;
    } catch (const storage::S3Error&) {
      throw;
    } catch (const std::exception& e) {  // corrupt or truncated: say so once, skip it from now on
      unreadable_.insert(newest);
      metrics_.record_checkpoint_read_error();
      spdlog::warn("evaluator: checkpoint {} cannot be read, skipping it: {}",
                   checkpoints_.location_of(newest), error_text(e));
      return std::nullopt;
    }
  }
}

void CheckpointWatch::expect_newest_readable(int64_t last_step) const {
  const auto names = checkpoints_.list();
  if (!names.empty() && unreadable_.count(names.back()) != 0) {
    throw std::runtime_error(
        "the job's final checkpoint " + checkpoints_.location_of(names.back()) +
        " cannot be read: the last evaluation is step " + std::to_string(last_step));
  }
}

}  // namespace cifar::train
