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
#include "train/datasets.h"
#include "train/lr_schedule.h"
#include "train/monitor.h"
#include "train/optimizer.h"
#include "train/progress.h"

namespace cifar::train {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

torch::Device resolve_device(const std::string& name) {
  if (name == "cpu") return torch::kCPU;
  if (name == "cuda") {
    if (!torch::cuda::is_available()) {
      throw std::invalid_argument("-c cuda: no CUDA device is available to this build");
    }
    return torch::kCUDA;
  }
  throw std::invalid_argument("unknown device '" + name + "' (cpu, cuda)");
}

// Wraps a loader batch as tensors without copying: the tensors share ownership of its buffers.
std::pair<torch::Tensor, torch::Tensor> to_tensors(data::Batch batch, torch::Device device) {
  auto owner = std::make_shared<data::Batch>(std::move(batch));
  auto keep_alive = [owner](void* /*unused*/) {};
  auto images = torch::from_blob(owner->images.data(),
                                 {owner->size, owner->channels, owner->height, owner->width},
                                 keep_alive, torch::kFloat32);
  auto labels = torch::from_blob(owner->labels.data(), {owner->size}, keep_alive, torch::kInt64);
  if (device.is_cpu()) return {images, labels};
  return {images.to(device, /*non_blocking=*/true), labels.to(device, /*non_blocking=*/true)};
}

torch::Tensor classification_loss(const torch::Tensor& logits, const torch::Tensor& labels,
                                  double label_smoothing) {
  namespace F = torch::nn::functional;
  return F::cross_entropy(logits, labels,
                          F::CrossEntropyFuncOptions().label_smoothing(label_smoothing));
}

struct Evaluation {
  double loss = 0;
  double accuracy = 0;
};

Evaluation evaluate(models::Classifier& model, data::DataLoader& loader, torch::Device device) {
  torch::NoGradGuard no_grad;
  model.eval();
  double loss_sum = 0;
  int64_t correct = 0;
  int64_t seen = 0;
  loader.start_epoch(0);
  while (auto batch = loader.next()) {
    auto [images, labels] = to_tensors(std::move(*batch), device);
    auto logits = model.forward(images);
    namespace F = torch::nn::functional;
    loss_sum +=
        F::cross_entropy(logits, labels, F::CrossEntropyFuncOptions().reduction(torch::kSum))
            .item<double>();
    correct += logits.argmax(1).eq(labels).sum().item<int64_t>();
    seen += labels.size(0);
  }
  model.train();
  if (seen == 0) return {};
  return {loss_sum / static_cast<double>(seen),
          static_cast<double>(correct) / static_cast<double>(seen)};
}

data::LoaderOptions loader_options(const TrainConfig& config, const data::ChannelStats& stats,
                                   bool training) {
  data::LoaderOptions o;
  o.batch_size = training ? config.batch_size : std::max<int64_t>(config.batch_size, 256);
  o.shuffle = training;
  o.augment = training && config.augment;
  // A last batch of a handful of images would give BatchNorm a noisy step; it is reshuffled in.
  o.drop_last = training;
  o.augmentation.normalize = stats;
  o.seed = config.seed;
  o.num_workers = config.loader_workers;
  return o;
}

// A sample of normalised training images for data-dependent initialisation (fastnet).
torch::Tensor init_sample(const std::shared_ptr<const data::Dataset>& train,
                          const data::ChannelStats& stats, torch::Device device) {
  data::LoaderOptions o;
  o.batch_size = std::min<int64_t>(train->size(), 5000);
  o.shuffle = false;
  o.augment = false;
  o.augmentation.normalize = stats;
  o.num_workers = 1;
  data::DataLoader loader(train, o);
  loader.start_epoch(0);
  auto batch = loader.next();
  return to_tensors(std::move(*batch), device).first.clone();
}

std::string run_name(const TrainConfig& config) {
  return config.name.empty() ? config.model : config.name;
}

}  // namespace

TrainResult run_training(const TrainConfig& config) {
  const auto device = resolve_device(config.device);
  const int threads =
      config.threads > 0 ? config.threads : static_cast<int>(std::thread::hardware_concurrency());
  // LibTorch defaults to one intra-op thread on some machines: set it explicitly.
  torch::set_num_threads(std::max(threads, 1));

  auto sets = load_datasets(config);
  const auto stats = data::channel_stats(sets.train);
  auto train_set = std::make_shared<const data::Dataset>(std::move(sets.train));
  auto test_set = std::make_shared<const data::Dataset>(std::move(sets.test));
  data::DataLoader train_loader(train_set, loader_options(config, stats, /*training=*/true));
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
    MonitorLog::truncate_after(model_dir, state.epoch);
  } else if (!checkpoints.list().empty()) {
    // Never overwrite a run's checkpoints silently.
    throw std::invalid_argument("model dir " + model_dir.string() +
                                " already holds checkpoints; pass --resume to continue that run "
                                "or choose another -md");
  } else {
    MonitorLog::truncate_after(model_dir, 0);  // records of a run killed before its checkpoint
  }
  MonitorLog monitor(model_dir);

  std::string bind;
  if (config.metrics_port >= 0) {
    bind = config.metrics_bind + ":" + std::to_string(config.metrics_port);
  }
  metrics::RuntimeMetrics metrics({run_name(config), "master", "0"}, bind);
  if (metrics.port() != 0) spdlog::info("metrics on :{}/metrics", metrics.port());

  Progress progress(Progress::parse_mode(config.progress), steps_per_epoch, config.epochs,
                    config.log_every_steps);
  TrainResult result;
  result.best_test_accuracy = state.best_test_accuracy;
  int64_t images_this_process = 0;
  int64_t steps_this_process = 0;
  int64_t steady_images = 0;
  double steady_seconds = 0;
  bool stop = false;

  auto save_checkpoint = [&] {
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
      loss.backward();
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
      state.epoch_loss_sum += loss_value * static_cast<double>(n);
      state.epoch_correct += logits.argmax(1).eq(labels).sum().item<int64_t>();
      state.epoch_seen += n;
      state.step += 1;
      state.batch_in_epoch += 1;
      images_this_process += n;
      const double step_seconds = seconds_between(t_start, t_optimizer);
      const double data_wait_seconds = seconds_between(t_start, t_data);
      if (++steps_this_process > TrainResult::kWarmupSteps) {
        steady_images += n;
        steady_seconds += step_seconds;
      }
      state.epoch_seconds += step_seconds;
      const double accuracy =
          static_cast<double>(state.epoch_correct) / static_cast<double>(state.epoch_seen);
      const double images_per_second = static_cast<double>(state.epoch_seen) / state.epoch_seconds;
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
    const double seen = static_cast<double>(std::max<int64_t>(state.epoch_seen, 1));
    EpochRecord record;
    record.epoch = epoch + 1;
    record.step = state.step;
    record.train_loss = state.epoch_loss_sum / seen;
    record.train_accuracy = static_cast<double>(state.epoch_correct) / seen;
    record.test_loss = evaluation.loss;
    record.test_accuracy = evaluation.accuracy;
    record.learning_rate = lr;
    record.images_per_second = state.epoch_seconds > 0 ? seen / state.epoch_seconds : 0;
    record.seconds = state.epoch_seconds;
    progress.end_epoch(record);

    result.last_epoch = record;
    result.best_test_accuracy = std::max(result.best_test_accuracy, record.test_accuracy);
    if (stop) break;  // a partial epoch: its checkpoint is written, no epoch record

    monitor.append(record);
    state.epoch = epoch + 1;
    state.batch_in_epoch = 0;
    state.epoch_loss_sum = 0;
    state.epoch_correct = 0;
    state.epoch_seen = 0;
    state.epoch_seconds = 0;
    state.best_test_accuracy = result.best_test_accuracy;
    save_checkpoint();
  }

  result.epochs_completed = state.epoch;
  result.steps = state.step;
  const double step_seconds = result.time.total();
  result.images_per_second =
      step_seconds > 0 ? static_cast<double>(images_this_process) / step_seconds : 0;
  result.steady_images_per_second =
      steady_seconds > 0 ? static_cast<double>(steady_images) / steady_seconds : 0;
  return result;
}

}  // namespace cifar::train
