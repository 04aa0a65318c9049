#include "train/evaluator.h"

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <stdexcept>
#include <thread>

#include "train/atomic_file.h"
#include "train/batches.h"
#include "train/checkpoint.h"
#include "train/datasets.h"
#include "train/device.h"
#include "train/done_marker.h"
#include "train/fence.h"
#include "train/loss.h"
#include "train/metrics_endpoint.h"

namespace cifar::train {
namespace fs = std::filesystem;
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

  const fs::path dir = config.model_dir;
  const CheckpointManager checkpoints(dir, run_name(config), config.keep_checkpoints);
  const fs::path best_path = dir / (run_name(config) + "-best.pt");
  const fs::path log_path = dir / "evaluation.jsonl";
  EvaluatorResult result;
  // Checkpoints that exist but cannot be read: reported once each, never tried again.
  std::set<fs::path> unreadable;
  // Checkpoints a replaced chief wrote after its replacement took over (fence.h): passed over.
  std::set<fs::path> stale;
  spdlog::info("evaluator: watching {} for checkpoints", dir.string());
  while (true) {
    auto files = checkpoints.list();
    files.erase(std::remove_if(files.begin(), files.end(),
                               [&](const fs::path& f) { return stale.count(f) != 0; }),
                files.end());
    if (!files.empty() && unreadable.count(files.back()) == 0) {
      const auto& newest = files.back();
      // Only reading the file decides whether it is unreadable; what is done with it after is not.
      std::optional<TrainState> loaded;
      try {
        const auto state = CheckpointManager::read_state(newest);
        if (is_stale_checkpoint(read_fence(config, FenceSlot::kChief), state.written_by,
                                state.step)) {
          stale.insert(newest);
          spdlog::warn(
              "evaluator: ignoring {}: written by incarnation {} of the chief after a newer "
              "one took over",
              newest.string(), state.written_by);
          continue;
        }
        if (state.step > result.last_step) {
          CheckpointManager::load_model(newest, *model);
          loaded = state;
        }
      } catch (const std::exception& e) {
        const std::string what = e.what();
        const auto first_line = what.substr(0, what.find('\n'));
        if (fs::exists(newest)) {  // corrupt or truncated: say so once, and skip it from now on
          unreadable.insert(newest);
          metrics->record_checkpoint_read_error();
          spdlog::warn("evaluator: checkpoint {} cannot be read, skipping it: {}", newest.string(),
                       first_line);
        } else {  // rotated away by the chief between listing and reading: a newer one is there
          spdlog::debug("evaluator: skipping {}: {}", newest.string(), first_line);
        }
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
        std::ofstream(log_path, std::ios::app)
            << nlohmann::json{{"step", state.step},
                              {"epoch", state.epoch},
                              {"test_loss", evaluation.loss},
                              {"test_accuracy", evaluation.accuracy}}
                   .dump()
            << "\n";
        if (result.best_step < 0 || evaluation.accuracy > result.best_accuracy) {
          result.best_accuracy = evaluation.accuracy;
          result.best_step = state.step;
          try {
            check_fence();
            replace_atomically(best_path, [&](const fs::path& temp) {
              fs::copy_file(newest, temp, fs::copy_options::overwrite_existing);
            });
          } catch (const Replaced&) {
            throw;
          } catch (const std::exception& e) {  // rotated away meanwhile: the next best is kept
            spdlog::warn("evaluator: could not keep {} as the best: {}", newest.string(), e.what());
          }
        }
      }
    }
    if (const auto final_step = read_done_marker(done_marker_path(config))) {
      if (result.last_step >= *final_step) break;
      // Listed again: the final checkpoint is written before the marker, so it is the newest now.
      const auto final_files = checkpoints.list();
      if (!final_files.empty() && unreadable.count(final_files.back()) != 0) {
        throw std::runtime_error("the job's final checkpoint " + final_files.back().string() +
                                 " cannot be read: the last evaluation is step " +
                                 std::to_string(result.last_step));
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
