#include "train/trainer.h"

#include <spdlog/spdlog.h>
#include <torch/cuda.h>
#include <torch/nn/functional/loss.h>
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <thread>
#include <utility>

#include "data/loader.h"
#include "metrics/runtime_metrics.h"
#include "models/model.h"
#include "train/checkpoint.h"
#include "train/data_parallel.h"
#include "train/datasets.h"
#include "train/lr_schedule.h"
#include "train/monitor.h"
#include "train/optimizer.h"
#include "train/progress.h"
#include "train/setup.h"

namespace cifar::train {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

}  // namespace

TrainResult run_training(const TrainConfig& config, DataParallel* parallel) {
  const bool chief = parallel == nullptr || parallel->rank() == 0;
  const auto device = resolve_device(config.device);
  const int threads = configure_threads(config);

  auto sets = load_datasets(config);
  const auto stats = data::channel_stats(sets.train);
  auto train_set = std::make_shared<const data::Dataset>(std::move(sets.train));
  auto test_set = std::make_shared<const data::Dataset>(std::move(sets.test));
  auto train_options = loader_options(config, stats, /*training=*/true);
  if (parallel != nullptr) {
    train_options.rank = parallel->rank();
    train_options.world_size = parallel->world_size();
  }
  data::DataLoader train_loader(train_set, train_options);
  data::DataLoader test_loader(test_set, loader_options(config, stats, /*training=*/false));
  const int64_t steps_per_epoch = train_loader.batches_per_epoch();
  if (steps_per_epoch == 0) {
    throw std::invalid_argument("batch size " + std::to_string(config.batch_size) +
                                " is larger than the training set (" +
                                std::to_string(train_set->size()) + " images)");
  }
  const int64_t total_steps = config.epochs * steps_per_epoch;

  torch::manual_seed(config.seed);
  auto model = models::make_model(config.model,
                                  {config.num_classes, train_set->channels, train_set->height});
  model->to(device);
  model->init_from_data(init_sample(train_set, stats, device));
  std::vector<torch::Tensor> trainable;
  for (auto& p : model->parameters()) {
    if (p.requires_grad()) trainable.push_back(p);
  }
  // What must be equal on every rank of a data-parallel job.
  const auto buffers = model->buffers();
  auto replica = trainable;
  replica.insert(replica.end(), buffers.begin(), buffers.end());
  if (parallel != nullptr) parallel->broadcast_from_rank0(replica);
  auto optimizer = make_optimizer(config.optimizer, config.schedule.base_lr, trainable);
  spdlog::info("model {}: {} trainable parameters, {} threads, device {}", config.model,
               models::parameter_count(*model), threads, device.str());

  const std::filesystem::path model_dir = config.model_dir;
  std::filesystem::create_directories(model_dir);
  const CheckpointManager checkpoints(model_dir, run_name(config), config.keep_checkpoints);
  TrainState state;
  if (config.resume) {
    if (auto restored = checkpoints.load_latest(*model, *optimizer)) {
      state = *restored;
    } else {
      spdlog::info("no checkpoint in {}: starting from scratch", model_dir.string());
    }
    if (chief) MonitorLog::truncate_after(model_dir, state.epoch);
  } else if (!checkpoints.list().empty()) {
    // Never overwrite a run's checkpoints silently.
    throw std::invalid_argument("model dir " + model_dir.string() +
                                " already holds checkpoints; pass --resume to continue that run "
                                "or choose another -md");
  } else if (chief) {
    MonitorLog::truncate_after(model_dir, 0);  // records of a run killed before its checkpoint
  }
  if (parallel != nullptr) {
    // Every rank must continue from the same checkpoint (the model dir on a shared volume).
    auto rank0_step = torch::tensor({state.step}, torch::kInt64);
    parallel->broadcast_from_rank0({rank0_step});
    if (rank0_step.item<int64_t>() != state.step) {
      throw std::runtime_error("rank " + std::to_string(parallel->rank()) + " resumed at step " +
                               std::to_string(state.step) + " but rank 0 at step " +
                               std::to_string(rank0_step.item<int64_t>()) +
                               ": every rank needs the same model dir (a shared volume)");
    }
  }
  std::optional<MonitorLog> monitor;
  if (chief) monitor.emplace(model_dir);

  const auto metrics_endpoint = make_runtime_metrics(config);
  auto& metrics = *metrics_endpoint;
  if (parallel != nullptr) parallel->attach(trainable, buffers, &metrics);

  // The ranks of a data-parallel job train in lockstep: rank 0 shows the progress for all.
  Progress progress(Progress::parse_mode(chief ? config.progress : "none"), steps_per_epoch,
                    config.epochs, config.log_every_steps);
  TrainResult result;
  result.best_test_accuracy = state.best_test_accuracy;
  ThroughputMeter throughput;
  bool stop = false;

  auto save_checkpoint = [&] {
    if (!chief) return;
    const auto start = Clock::now();
    const auto path = checkpoints.save(*model, *optimizer, state);
    metrics.record_checkpoint(seconds_between(start, Clock::now()));
    spdlog::debug("checkpoint {}", path.string());
  };

  for (int64_t epoch = state.epoch; epoch < config.epochs && !stop; ++epoch) {
    progress.begin_epoch(epoch + 1);
    metrics.set_epoch(epoch + 1);
    train_loader.start_epoch(epoch, state.batch_in_epoch);
    double lr = 0;

    while (true) {
      const auto t_start = Clock::now();
      auto batch = train_loader.next();
      if (!batch) break;
      const auto t_data = Clock::now();

      lr = learning_rate(config.schedule, state.step, steps_per_epoch, total_steps);
      set_learning_rate(*optimizer, lr);
      auto [images, labels] = to_tensors(std::move(*batch), device);
      auto logits = model->forward(images);
      auto loss = classification_loss(logits, labels, config.label_smoothing);
      const auto t_forward = Clock::now();
      optimizer->zero_grad();
      if (parallel != nullptr) parallel->begin_backward();
      loss.backward();
      if (parallel != nullptr) parallel->end_backward();  // waits for the gradients' all-reduce
      const auto t_backward = Clock::now();
      optimizer->step();
      const auto t_optimizer = Clock::now();

      const int64_t n = labels.size(0);
      const auto loss_value = loss.item<double>();
      if (!std::isfinite(loss_value)) {
        // Training on would only spread NaNs through the weights and every later checkpoint.
        throw std::runtime_error("training diverged: loss is " + std::to_string(loss_value) +
                                 " at step " + std::to_string(state.step + 1) +
                                 "; lower --lr (now " + std::to_string(lr) +
                                 ") or add --warmup-epochs. Checkpoints so far are kept.");
      }
      const double step_seconds = seconds_between(t_start, t_optimizer);
      const double data_wait_seconds = seconds_between(t_start, t_data);
      state.add_batch(loss_value, logits.argmax(1).eq(labels).sum().item<int64_t>(), n,
                      step_seconds);
      state.step += 1;
      state.batch_in_epoch += 1;
      if (parallel != nullptr) parallel->end_step(replica, state.step);
      throughput.add_step(n, step_seconds);
      const double accuracy = state.running_accuracy();
      const double images_per_second = state.running_images_per_second();
      metrics.record_step(
          {step_seconds, data_wait_seconds, n, loss_value, accuracy, images_per_second});
      progress.update(
          {state.batch_in_epoch, state.step, loss_value, accuracy, images_per_second, lr});

      const bool at_max_steps = config.max_steps > 0 && state.step >= config.max_steps;
      if (at_max_steps ||
          (config.checkpoint_every_steps > 0 && state.step % config.checkpoint_every_steps == 0)) {
        save_checkpoint();
      }
      result.time.data_wait += data_wait_seconds;
      result.time.forward += seconds_between(t_data, t_forward);
      result.time.backward += seconds_between(t_forward, t_backward);
      result.time.optimizer += seconds_between(t_backward, t_optimizer);
      result.time.other += seconds_between(t_optimizer, Clock::now());
      if (at_max_steps) {
        stop = true;
        break;
      }
    }

    const auto evaluation = evaluate(*model, test_loader, device);
    metrics.set_test_accuracy(evaluation.accuracy);
    auto record = state.epoch_record(epoch + 1, lr);
    record.test_loss = evaluation.loss;
    record.test_accuracy = evaluation.accuracy;
    progress.end_epoch(record);

    result.last_epoch = record;
    result.best_test_accuracy = std::max(result.best_test_accuracy, record.test_accuracy);
    if (stop) break;  // a partial epoch: its checkpoint is written, no epoch record

    if (monitor) monitor->append(record);
    state.start_epoch_after(epoch + 1);
    state.best_test_accuracy = result.best_test_accuracy;
    save_checkpoint();
  }

  result.epochs_completed = state.epoch;
  result.steps = state.step;
  throughput.report(result);
  return result;
}

void ThroughputMeter::add_step(int64_t images, double seconds) {
  images_ += images;
  if (++steps_ > TrainResult::kWarmupSteps) {
    steady_images_ += images;
    steady_seconds_ += seconds;
  }
}

void ThroughputMeter::report(TrainResult& result) const {
  const double total = result.time.total();
  result.images_per_second = total > 0 ? static_cast<double>(images_) / total : 0;
  result.steady_images_per_second =
      steady_seconds_ > 0 ? static_cast<double>(steady_images_) / steady_seconds_ : 0;
}

}  // namespace cifar::train
