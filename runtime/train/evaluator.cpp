#include "train/evaluator.h"

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "health/heartbeat.h"
#include "storage/store.h"
#include "train/batches.h"
#include "train/checkpoint_watch.h"
#include "train/datasets.h"
#include "train/device.h"
#include "train/done_marker.h"
#include "train/fence.h"
#include "train/json_lines.h"
#include "train/loss.h"
#include "train/metrics_endpoint.h"
#include "train/run_store.h"

namespace cifar::train {
namespace {

constexpr auto kPollInterval = std::chrono::milliseconds(500);

// What the evaluator writes into the run: a record of each evaluation (evaluation.jsonl) and a
// copy of the best checkpoint; a replaced evaluator (fence.h) writes neither.
class EvaluationRecord {
 public:
  EvaluationRecord(std::shared_ptr<storage::Store> store, std::string best_name, Fence fence)
      : store_(std::move(store)),
        fence_(std::move(fence)),
        log_(store_, "evaluation.jsonl", JsonLinesObject::Writes::kHere, fence_),
        best_name_(std::move(best_name)) {}
  // `best_bytes`: the evaluated checkpoint's, if it is the best so far.
  void add(const TrainState& state, const Evaluation& evaluation, const std::string* best_bytes) {
    log_.append({{"step", state.step},
                 {"epoch", state.epoch},
                 {"test_loss", evaluation.loss},
                 {"test_accuracy", evaluation.accuracy}});
    if (best_bytes != nullptr) {
      fence_.check();
      store_->put(best_name_, *best_bytes);
    }
  }

 private:
  std::shared_ptr<storage::Store> store_;
  Fence fence_;
  JsonLinesObject log_;
  std::string best_name_;
};

}  // namespace

EvaluatorResult run_evaluator(const TrainConfig& config, const Fence& fence) {
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
  CheckpointWatch watch(store, config, *metrics);
  EvaluationRecord record(store, run_name(config) + "-best.pt", fence);
  EvaluatorResult result;
  spdlog::info("evaluator: watching {} for checkpoints", store->location());
  while (true) {
    if (const auto loaded = watch.next(*model, result.last_step)) {
      const auto& state = loaded->state;
      const auto evaluation = evaluate(*model, test_loader, device);
      result.evaluated += 1;
      result.last_step = state.step;
      result.last_accuracy = evaluation.accuracy;
      metrics->set_test_accuracy(evaluation.accuracy);
      metrics->set_epoch(state.epoch);
      spdlog::info("evaluator: step {} (epoch {}): test loss {:.4f}, test accuracy {:.2f}%",
                   state.step, state.epoch, evaluation.loss, 100 * evaluation.accuracy);
      const bool best = result.best_step < 0 || evaluation.accuracy > result.best_accuracy;
      if (best) {
        result.best_accuracy = evaluation.accuracy;
        result.best_step = state.step;
      }
      record.add(state, evaluation, best ? &loaded->bytes : nullptr);
    }
    if (const auto final_step = read_done_marker(*store, config)) {
      if (result.last_step >= *final_step) break;
      // The final checkpoint is written before the marker, so it is the newest now.
      watch.expect_newest_readable(result.last_step);
    }
    const health::ExpectedQuiet quiet("waiting for the next checkpoint");
    std::this_thread::sleep_for(kPollInterval);
  }
  spdlog::info("evaluator: final test accuracy {:.2f}% (step {}), best {:.2f}% (step {})",
               100 * result.last_accuracy, result.last_step, 100 * result.best_accuracy,
               result.best_step);
  return result;
}

}  // namespace cifar::train
