#include "train/loop.h"

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>

#include "data/loader.h"
#include "health/heartbeat.h"
#include "metrics/runtime_metrics.h"
#include "models/model.h"
#include "storage/s3_client.h"
#include "train/batches.h"
#include "train/checkpoint.h"
#include "train/datasets.h"
#include "train/device.h"
#include "train/fence.h"
#include "train/graceful_stop.h"
#include "train/loss.h"
#include "train/lr_schedule.h"
#include "train/metrics_endpoint.h"
#include "train/monitor.h"
#include "train/precision.h"
#include "train/progress.h"
#include "train/run_store.h"

namespace cifar::train {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

UpdatePlan plan_updates(const TrainConfig& config, const GradientExchange& exchange,
                        const data::DataLoader& loader, int64_t training_images) {
  UpdatePlan plan;
  plan.batches_per_epoch = loader.batches_per_epoch();
  if (plan.batches_per_epoch == 0 && config.global_batch > 0) {
    throw std::invalid_argument("global batch " + std::to_string(config.global_batch) +
                                " is larger than the training set (" +
                                std::to_string(training_images) + " images)");
  }
  if (plan.batches_per_epoch == 0) {
    const auto place = exchange.place();
    throw std::invalid_argument(
        "batch size " + std::to_string(config.batch_size) +
        (place.count == 1
             ? " is larger than the training set (" + std::to_string(training_images) + " images)"
             : " leaves no batch in this trainer's share of " +
                   std::to_string(loader.samples_per_epoch()) + " images"));
  }
  plan.updates_per_epoch = exchange.updates_per_epoch(plan.batches_per_epoch);
  plan.schedule_updates = config.epochs * plan.updates_per_epoch;
  plan.total_updates = config.max_steps > 0 ? std::min(plan.schedule_updates, config.max_steps)
                                            : plan.schedule_updates;
  return plan;
}

TrainableModel trainable(const std::shared_ptr<models::Classifier>& model) {
  TrainableModel parts{model, {}, model->buffers()};
  for (auto& p : model->parameters()) {
    if (p.requires_grad()) parts.parameters.push_back(p);
  }
  return parts;
}

// A diverged step's loss on the metrics endpoint, kept up --metrics-linger seconds so that
// Prometheus scrapes it (the CifarTrainLossNaN alert) before the process exits. A stop request
// ends the wait at once: a diverged run has nothing to save.
void publish_divergence(const TrainConfig& config, metrics::RuntimeMetrics& metrics, double loss) {
  metrics.set_loss(loss);
  if (config.metrics_linger <= 0 || metrics.port() == 0) return;
  spdlog::warn(
      "training diverged; keeping the metrics endpoint up {} s so that Prometheus records the "
      "loss",
      config.metrics_linger);
  const health::ExpectedQuiet quiet("keeping the metrics up after the divergence");
  const auto until = Clock::now() + std::chrono::seconds(config.metrics_linger);
  while (Clock::now() < until && !stop_requested()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

// What the bookkeeping between steps (epochs, evaluation, checkpoints) works on: the run's parts,
// as run_training sets them up.
struct Run {
  GradientExchange& exchange;
  const TrainerPlace place;
  models::Classifier& model;
  const torch::Device device;
  metrics::RuntimeMetrics& metrics;
  Progress& progress;
  std::optional<data::DataLoader>& test_loader;  // where the exchange evaluates
  TrainState& state;
  TrainResult& result;
  int64_t last_saved = -1;  // the step of this run's newest checkpoint
};

// The chief checkpoints the current step (once: a step already saved is skipped).
void save_checkpoint(Run& run) {
  if (!run.place.chief || run.last_saved == run.state.step) return;
  const auto start = Clock::now();
  run.exchange.save_checkpoint(run.state);
  run.last_saved = run.state.step;
  run.metrics.record_checkpoint(seconds_between(start, Clock::now()));
}

// The record of the epoch so far, numbered `epoch` (at rate `lr`), with the test set's figures
// where this trainer evaluates; shown, and kept as the run's latest.
EpochRecord epoch_record(Run& run, int64_t epoch, double lr) {
  auto record = run.state.epoch_record(epoch, lr);
  record.test_loss = std::nan("");  // the evaluator role's, where there is one
  record.test_accuracy = std::nan("");
  if (run.test_loader) {
    const auto evaluation = evaluate(run.model, *run.test_loader, run.device);
    run.metrics.set_test_accuracy(evaluation.accuracy);
    record.test_loss = evaluation.loss;
    record.test_accuracy = evaluation.accuracy;
    run.result.best_test_accuracy = std::max(run.result.best_test_accuracy, evaluation.accuracy);
  }
  run.progress.end_epoch(record);
  run.result.last_epoch = record;
  return record;
}

// The weight of a trainer's mean loss that makes the mean of `count` trainers' gradients the
// mean over the step's whole batch: 1 where the trainers' shares are equal; where the global
// batch is not a multiple of the world, a share of n of it weighs n x count / global.
double share_of_the_mean(int64_t n, int64_t global, int count) {
  return static_cast<double>(n) * count / static_cast<double>(global);
}

void begin_epoch(Run& run) {
  run.progress.begin_epoch(run.state.epoch + 1);
  run.metrics.set_epoch(run.state.epoch + 1);
}

TrainResult train_to_the_end(const TrainConfig& config, GradientExchange& exchange,
                             const Fence& fence, std::optional<StopWindow>& stop_window) {
  const auto place = exchange.place();
  const auto device = resolve_device(config.device);
  const auto precision = resolve_precision(config.precision, device);
  const int threads = configure_threads(config.threads);
  // Served before the data is read: a read that hangs (a volume that stopped answering) is then
  // reported on the metrics like any stall, for the operator to act on.
  const auto metrics_endpoint = make_runtime_metrics(config);
  auto& metrics = *metrics_endpoint;

  auto sets = load_datasets(config);
  const auto stats = data::channel_stats(sets.train);
  auto train_set = std::make_shared<const data::Dataset>(std::move(sets.train));
  auto test_set = std::make_shared<const data::Dataset>(std::move(sets.test));
  const auto train_options = loader_options(config, stats, /*training=*/true);
  // This trainer's share of each step, where the exchange places it (which may change).
  const auto loader_for = [&](const TrainerPlace& at) {
    auto options = train_options;
    options.rank = at.rank;
    options.world_size = at.count;
    return std::make_unique<data::DataLoader>(train_set, options);
  };
  auto train_loader = loader_for(place);
  TrainerPlace reading = place;  // the place the loader reads
  const auto plan = plan_updates(config, exchange, *train_loader, train_set->size());

  torch::manual_seed(config.seed);
  auto model = models::make_model(config.model,
                                  {config.num_classes, train_set->channels, train_set->height});
  model->to(device);
  if (exchange.initializes_model()) model->init_from_data(init_sample(train_set, stats, device));

  TrainState state = exchange.start(trainable(model), plan, metrics);
  exchange.committed(state);
  if (place.chief) fence.record_resumed_step(state.step);
  // A SIGTERM from here on stops at a step boundary with the step saved. Opened before the line
  // below, so that whoever reads that line knows a stop is no longer an immediate exit.
  if (!stop_window) stop_window.emplace();
  spdlog::info("model {}: {} trainable parameters, {} threads, device {}, {}; {}", config.model,
               models::parameter_count(*model), threads, device.str(),
               contract::name_of(kPrecisionNames, precision), exchange.describe());

  std::optional<MonitorLog> monitor;
  if (place.chief) {
    monitor.emplace(open_run_store(config), fence);
    monitor->truncate_after(state.epoch);  // epochs to be redone
  }
  std::optional<data::DataLoader> test_loader;
  if (exchange.evaluates()) {
    test_loader.emplace(test_set, loader_options(config, stats, /*training=*/false));
  }
  const bool shows_progress = place.chief || !place.in_lockstep;
  Progress progress(Progress::parse_mode(shows_progress ? config.progress : "none"),
                    plan.batches_per_epoch, config.epochs, config.log_every_steps);
  TrainResult result;
  result.evaluated = exchange.evaluates();
  result.best_test_accuracy = state.best_test_accuracy;
  ThroughputMeter throughput;
  double lr = 0;
  Run run{exchange, place, *model, device, metrics, progress, test_loader, state, result};

  // The loader's epochs follow the job's where the trainers step together; where they do not
  // (an asynchronous PS), each trainer's loader runs through its share at its own pace.
  int64_t loader_epoch = state.epoch;
  train_loader->start_epoch(loader_epoch, state.batch_in_epoch);
  // An elastic synchronous PS job's trainer reads its slot of the step's global batch: where its
  // slot or the number of trainers changed, it reads on from the step it is at in its new place.
  const auto read_from_the_place_now = [&] {
    reading = exchange.place();
    train_loader = loader_for(reading);
    loader_epoch = state.epoch;
    train_loader->start_epoch(loader_epoch, state.batch_in_epoch);
  };
  const auto place_moved = [&] {
    const auto now = exchange.place();
    return now.rank != reading.rank || now.count != reading.count;
  };
  if (place_moved()) read_from_the_place_now();
  begin_epoch(run);
  metrics.set_job_position(state.step, plan.total_updates);
  bool done = state.step >= plan.total_updates;
  bool epoch_open = !done;  // whether the current epoch has batches not yet recorded
  while (!done) {
    const auto t_start = Clock::now();
    auto batch = train_loader->next();
    if (!batch) {
      train_loader->start_epoch(++loader_epoch);
      continue;
    }
    const auto t_data = Clock::now();
    lr = learning_rate(config.schedule, state.step, plan.updates_per_epoch, plan.schedule_updates);
    const double weight = share_of_the_mean(batch->size, batch->global_size, reading.count);
    const auto trained = SampleTally::of(batch->samples);
    auto [images, labels] = to_tensors(std::move(*batch), device);
    torch::Tensor logits;
    {
      const AutocastScope autocast(precision, device);
      logits = model->forward(images);
    }
    // The loss in fp32 whatever the forward pass ran in (a no-op for fp32 logits).
    auto loss = classification_loss(logits.to(torch::kFloat), labels, config.label_smoothing);
    const auto t_forward = Clock::now();
    model->zero_grad();
    exchange.begin_backward();
    (weight == 1.0 ? loss : loss * weight).backward();
    const auto t_backward = Clock::now();
    const auto loss_value = loss.item<double>();
    if (!std::isfinite(loss_value)) {
      // Training on would only spread NaNs through the weights and every later checkpoint.
      publish_divergence(config, metrics, loss_value);
      throw std::runtime_error("training diverged: loss is " + std::to_string(loss_value) +
                               " at step " + std::to_string(state.step + 1) + "; lower --lr (now " +
                               std::to_string(lr) +
                               ") or add --warmup-epochs. Checkpoints so far are kept.");
    }
    const auto update = exchange.update(lr, trained);
    const auto t_update = Clock::now();
    if (update.redo) {
      // Not taken: computed again in this trainer's place now, from the step the job is at.
      if (update.step != state.step) {
        state.step = update.step;
        const int64_t job_epoch = std::min(state.step / plan.updates_per_epoch, config.epochs);
        if (job_epoch > state.epoch) {  // trained without this trainer: no record of its own
          state.start_epoch_after(job_epoch);
          begin_epoch(run);
        }
        state.batch_in_epoch = state.step % plan.updates_per_epoch;
        done = state.step >= plan.total_updates;
      }
      read_from_the_place_now();
      continue;
    }

    const int64_t previous_step = state.step;
    state.step = update.step;
    state.batch_in_epoch += 1;
    done = update.done || state.step >= plan.total_updates;
    const int64_t n = labels.size(0);
    const double step_seconds = seconds_between(t_start, t_update);
    const double data_wait_seconds = seconds_between(t_start, t_data);
    state.add_batch(loss_value, logits.argmax(1).eq(labels).sum().item<int64_t>(), n, step_seconds);
    if (const auto& tally = update.samples) {
      // From an epoch's first batch (not within one resumed from a checkpoint without a tally).
      if (!state.epoch_samples && state.batch_in_epoch == 1) state.epoch_samples.emplace();
      if (state.epoch_samples) *state.epoch_samples += *tally;
    }
    throughput.add_step(n, step_seconds);
    const double accuracy = state.running_accuracy();
    const double images_per_second = state.running_images_per_second();
    metrics.record_step(
        {step_seconds, data_wait_seconds, n, loss_value, accuracy, images_per_second});
    metrics.set_job_position(state.step, plan.total_updates);
    health::note_progress();
    progress.update(
        {state.batch_in_epoch, state.step, loss_value, accuracy, images_per_second, lr});

    const int64_t job_epoch = std::min(state.step / plan.updates_per_epoch, config.epochs);
    if (job_epoch > state.epoch) {
      const auto record = epoch_record(run, job_epoch, lr);
      if (monitor) monitor->append(record);
      state.start_epoch_after(job_epoch);
      state.best_test_accuracy = result.best_test_accuracy;
      save_checkpoint(run);
      epoch_open = !done;
      if (epoch_open) begin_epoch(run);
    } else if (const int64_t every = config.checkpoint_every_steps;
               done || (every > 0 && state.step / every > previous_step / every) ||
               exchange.wants_checkpoint()) {
      save_checkpoint(run);  // the end, a multiple of --checkpoint-every, or asked for
    }
    result.time.data_wait += data_wait_seconds;
    result.time.forward += seconds_between(t_data, t_forward);
    result.time.backward += seconds_between(t_forward, t_backward);
    result.time.communication += update.communication_seconds;
    result.time.optimizer += seconds_between(t_backward, t_update) - update.communication_seconds;
    result.time.other += seconds_between(t_update, Clock::now());
    // A checkpoint the store refused, or could not take for longer than the job allows, ends the
    // run here, between steps (its write is in the background).
    if (place.chief) {
      const auto& checkpoints = *exchange.checkpoints();
      checkpoints.raise_if_failed();
      monitor->raise_if_failed();
      publish_store_health(metrics, checkpoints.store(), checkpoints.saved_step());
    }
    exchange.committed(state);
    if (!done && exchange.agree_to_stop(stop_requested())) {
      result.stopped = true;
      break;
    }
    if (!done && place_moved()) read_from_the_place_now();
  }
  // Stopped inside an epoch (--max-steps): its test figures so far, but no epoch record. A
  // graceful stop saves at once instead: the grace period is short.
  if (epoch_open && test_loader && !result.stopped) epoch_record(run, state.epoch + 1, lr);

  save_checkpoint(run);
  // Written before the done marker (finish), which names the final checkpoint, and before a
  // stopped process exits saying that its state is saved.
  if (place.chief) {
    // Perhaps for as long as the store is away: saying so meanwhile, as between steps. The
    // store's own bound (--max-unsaved-seconds) and its metrics cover that wait, not a stall.
    const health::ExpectedQuiet quiet("waiting for the last checkpoint to be saved");
    const auto& checkpoints = *exchange.checkpoints();
    while (!checkpoints.wait_until_saved(std::chrono::seconds(1))) {
      publish_store_health(metrics, checkpoints.store(), checkpoints.saved_step());
    }
    publish_store_health(metrics, checkpoints.store(), checkpoints.saved_step());
    monitor->wait_until_saved();
  }
  if (!result.stopped) exchange.finish(state);
  result.epochs_completed = state.epoch;
  result.steps = state.step;
  throughput.report(result);
  return result;
}

}  // namespace

TrainResult run_training(const TrainConfig& config, GradientExchange& exchange,
                         const Fence& fence) {
  // Closed once the run's resources are (the loaders' threads, the metrics server): a stop asked
  // while the run winds down is a request too, not an exit that says nothing.
  std::optional<StopWindow> stop_window;
  return run_training(config, exchange, fence, stop_window);
}

TrainResult run_training(const TrainConfig& config, GradientExchange& exchange, const Fence& fence,
                         std::optional<StopWindow>& stop_window) {
  try {
    auto result = train_to_the_end(config, exchange, fence, stop_window);
    if (const auto* checkpoints = exchange.checkpoints()) {
      result.saved_step = checkpoints->saved_step().value_or(-1);
    }
    return result;
  } catch (const storage::S3Error& e) {
    // A store that refused, or stayed away longer than the job allows, whichever write met it (a
    // checkpoint, the monitor log, the fence): what the job keeps is the newest checkpoint saved.
    const auto* checkpoints = exchange.checkpoints();
    if (checkpoints == nullptr) throw;
    const auto saved = checkpoints->saved_step();
    throw e.retold(std::string(e.what()) + "; " +
                   (saved ? "the newest checkpoint saved is step " + std::to_string(*saved)
                          : std::string("no checkpoint was saved by this process")));
  }
}

}  // namespace cifar::train
