#include "train/evaluator.h"

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <optional>
#include <set>
#include <stdexcept>
#include <thread>

#include "storage/s3_client.h"
#include "storage/store.h"
#include "train/batches.h"
#include "train/checkpoint.h"
#include "train/datasets.h"
#include "train/device.h"
#include "train/done_marker.h"
#include "train/error_text.h"
#include "train/fence.h"
#include "train/json_lines.h"
#include "train/loss.h"
#include "train/metrics_endpoint.h"
#include "train/run_store.h"

namespace cifar::train {
namespace {

constexpr auto kPollInterval = std::chrono::milliseconds(500);

}  // namespace

EvaluatorResult run_evaluator(const TrainConfig& config) {
  const auto device = resolve_device(config.device);
  configure_threads(config.threads);
  auto sets = load_datasets(config);
  const auto stats = data::channel_stats(sets.train);
  auto test_set = std::make_shared<const data::Dataset>(std::move(sets.test));
  data::DataLoader test_loader(test_set, loader_options(config, stats, /*training=*/false));
  auto model =
      models::make_model(config.model, {config.num_classes, test_set->channels, test_set->height});
  model->to(device);
  auto metrics = make_runtime_metrics(config);

  // One store (one pool of connections) for every request: listings, checkpoints, the chief's
  // fence, the done marker; riding out an outage up to --max-unsaved-seconds.
  const std::shared_ptr<storage::Store> store = open_run_store(config);
  const CheckpointManager checkpoints(store, run_name(config), config.keep_checkpoints);
  const std::string best_name = run_name(config) + "-best.pt";
  JsonLinesObject log(store, "evaluation.jsonl");
  EvaluatorResult result;
  // The newest checkpoint downloaded so far: a listing that names nothing newer costs no GET (the
  // names carry the step, zero-padded: their byte order is step order).
  std::string newest_fetched;
  // Checkpoints that exist but cannot be read: reported once each, never tried again.
  std::set<std::string> unreadable;
  // Checkpoints a replaced chief wrote after its replacement took over (fence.h): passed over.
  std::set<std::string> stale;
  spdlog::info("evaluator: watching {} for checkpoints", store->location());
  while (true) {
    auto names = checkpoints.list();
    names.erase(std::remove_if(names.begin(), names.end(),
                               [&](const std::string& n) { return stale.count(n) != 0; }),
                names.end());
    if (!names.empty() && names.back() > newest_fetched && unreadable.count(names.back()) == 0) {
      const auto& newest = names.back();
      // Only parsing the object decides whether it is unreadable; what is done with it after is
      // not (nor can the store fail to answer: that is an error of its own).
      const auto bytes = checkpoints.read(newest);
      if (!bytes) {  // rotated away by the chief between listing and reading: a newer one is there
        spdlog::debug("evaluator: {} is gone", newest);
        continue;
      }
      newest_fetched = newest;
      std::optional<TrainState> loaded;
      try {
        const auto state = CheckpointManager::state_from_bytes(*bytes);
        if (is_stale_checkpoint(read_fence(*store, config, FenceSlot::kChief), state.written_by,
                                state.step)) {
          stale.insert(newest);
          spdlog::warn(
              "evaluator: ignoring {}: written by incarnation {} of the chief after a newer "
              "one took over",
              checkpoints.location_of(newest), state.written_by);
          continue;
        }
        if (state.step > result.last_step) {
          CheckpointManager::model_from_bytes(*bytes, *model);
          loaded = state;
        }
      } catch (const Replaced&) {
        throw;
      } catch (const storage::S3Error&) {
        throw;
      } catch (const std::exception& e) {  // corrupt or truncated: say so once, skip it from now on
        unreadable.insert(newest);
        metrics->record_checkpoint_read_error();
        spdlog::warn("evaluator: checkpoint {} cannot be read, skipping it: {}",
                     checkpoints.location_of(newest), error_text(e));
      }
      if (loaded) {
        const auto& state = *loaded;
        const auto evaluation = evaluate(*model, test_loader, device);
        result.evaluated += 1;
        result.last_step = state.step;
        result.last_accuracy = evaluation.accuracy;
        metrics->set_test_accuracy(evaluation.accuracy);
        metrics->set_epoch(state.epoch);
        spdlog::info("evaluator: step {} (epoch {}): test loss {:.4f}, test accuracy {:.2f}%",
                     state.step, state.epoch, evaluation.loss, 100 * evaluation.accuracy);
        check_fence();  // a replaced evaluator records nothing
        log.append({{"step", state.step},
                    {"epoch", state.epoch},
                    {"test_loss", evaluation.loss},
                    {"test_accuracy", evaluation.accuracy}});
        if (result.best_step < 0 || evaluation.accuracy > result.best_accuracy) {
          result.best_accuracy = evaluation.accuracy;
          result.best_step = state.step;
          check_fence();
          store->put(best_name, *bytes);
        }
      }
    }
    if (const auto final_step = read_done_marker(*store, config)) {
      if (result.last_step >= *final_step) break;
      // Listed again: the final checkpoint is written before the marker, so it is the newest now.
      const auto final_names = checkpoints.list();
      if (!final_names.empty() && unreadable.count(final_names.back()) != 0) {
        throw std::runtime_error(
            "the job's final checkpoint " + checkpoints.location_of(final_names.back()) +
            " cannot be read: the last evaluation is step " + std::to_string(result.last_step));
      }
    }
    std::this_thread::sleep_for(kPollInterval);
  }
  spdlog::info("evaluator: final test accuracy {:.2f}% (step {}), best {:.2f}% (step {})",
               100 * result.last_accuracy, result.last_step, 100 * result.best_accuracy,
               result.best_step);
  return result;
}

}  // namespace cifar::train
