#include "distributed/ps/trainer.h"

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>
#include <stdexcept>

#include "distributed/ps/client.h"
#include "distributed/ps/ps_checkpoint.h"
#include "distributed/ps/shard.h"
#include "distributed/ps/tensor_codec.h"
#include "train/checkpoint.h"
#include "train/datasets.h"
#include "train/evaluator.h"
#include "train/lr_schedule.h"
#include "train/monitor.h"
#include "train/progress.h"
#include "train/setup.h"

namespace cifar::ps {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// The model's trainable parameters, and the host tensors the PS client reads them into and sends
// their gradients from (the client works on host memory). On the CPU those are the parameters and
// gradients themselves; on a GPU, page-locked host copies, staged each step.
struct Trainable {
  std::vector<ParameterInfo> infos;
  std::vector<torch::Tensor> params;
  std::vector<std::vector<int64_t>> shapes;
  std::vector<torch::Tensor> host_params;  // the params themselves on the CPU
  std::vector<torch::Tensor> host_grads;   // empty on the CPU

  [[nodiscard]] bool staged() const { return !host_grads.empty(); }

  // The gradients of the last backward, in host memory.
  std::vector<torch::Tensor> gradients() {
    if (!staged()) {
      std::vector<torch::Tensor> grads;
      grads.reserve(params.size());
      for (const auto& p : params) grads.push_back(p.grad());
      return grads;
    }
    // Blocking copies: they also wait for the last step's parameter uploads, so the client
    // overwrites host_params only after the device has read them.
    for (size_t i = 0; i < params.size(); ++i) host_grads[i].copy_(params[i].grad());
    return host_grads;
  }

  // The model takes the values the client wrote into host_params.
  void upload() {
    if (!staged()) return;
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < params.size(); ++i) {
      params[i].copy_(host_params[i], /*non_blocking=*/true);
    }
  }
};

Trainable trainable_parameters(torch::nn::Module& model) {
  Trainable t;
  for (auto& p : model.named_parameters()) {
    if (!p.value().requires_grad()) continue;
    t.infos.push_back({p.key(), p.value().numel()});
    t.params.push_back(p.value());
    t.shapes.push_back(p.value().sizes().vec());
  }
  const bool on_cpu = t.params.empty() || t.params.front().is_cpu();  // a model is on one device
  if (on_cpu) {
    t.host_params = t.params;
    return t;
  }
  for (const auto& param : t.params) {
    const auto pinned = torch::TensorOptions().dtype(param.dtype()).pinned_memory(param.is_cuda());
    t.host_params.push_back(torch::empty(param.sizes(), pinned));
    t.host_grads.push_back(torch::empty(param.sizes(), pinned));
  }
  return t;
}

ClientOptions client_options(const train::TrainConfig& config) {
  const auto& ps = config.distributed.ps;
  ClientOptions o;
  o.addresses = config.distributed.job.cluster.ps;
  o.token = ps.token;
  o.max_message_bytes = ps.max_message_mb << 20;
  o.wire_dtype = wire_dtype(ps.wire_dtype);
  o.retry_seconds = ps.retry_seconds;
  // A sync round may wait --ps-timeout for a silent trainer before it goes on.
  o.call_seconds = 2 * ps.timeout_seconds + 60;
  return o;
}

}  // namespace

train::TrainResult run_ps_trainer(const train::TrainConfig& config) {
  const auto& dist = config.distributed;
  const auto& job = dist.job;
  const int rank = job.trainer_rank();
  const int trainers = job.trainer_count();
  const bool chief = job.is_chief();
  const Mode mode = parse_mode(dist.ps.mode);
  const auto device = train::resolve_device(config.device);
  train::configure_threads(config);

  auto sets = train::load_datasets(config);
  const auto stats = data::channel_stats(sets.train);
  auto train_set = std::make_shared<const data::Dataset>(std::move(sets.train));
  auto loader_options = train::loader_options(config, stats, /*training=*/true);
  loader_options.rank = rank;
  loader_options.world_size = trainers;
  data::DataLoader loader(train_set, loader_options);
  const int64_t batches = loader.batches_per_epoch();
  if (batches == 0) {
    throw std::invalid_argument("batch size " + std::to_string(config.batch_size) +
                                " leaves no batch in this trainer's share of " +
                                std::to_string(loader.samples_per_epoch()) + " images");
  }
  // A sync update consumes one batch of every trainer; an asynchronous one, one batch.
  const int64_t updates_per_epoch = mode == Mode::kSync ? batches : batches * trainers;
  // The schedule spans all epochs, as in single-process training; --max-steps only stops early.
  const int64_t schedule_updates = config.epochs * updates_per_epoch;
  const int64_t total_updates =
      config.max_steps > 0 ? std::min(schedule_updates, config.max_steps) : schedule_updates;

  torch::manual_seed(config.seed);
  auto model = models::make_model(config.model,
                                  {config.num_classes, train_set->channels, train_set->height});
  model->to(device);
  if (chief) model->init_from_data(train::init_sample(train_set, stats, device));
  auto trainable = trainable_parameters(*model);
  const int servers = static_cast<int>(job.cluster.ps.size());
  const int stripes = stripes_per_server(trainable.infos, servers, dist.ps.stripes);
  const ShardLayout layout(trainable.infos, servers * stripes);

  auto metrics = train::make_runtime_metrics(config);
  auto options = client_options(config);
  options.stripes = stripes;
  PsClient client(options, layout, metrics.get());
  const train::CheckpointManager checkpoints(config.model_dir, train::run_name(config),
                                             config.keep_checkpoints);
  const auto done_marker = train::done_marker_path(config);
  spdlog::info(
      "{} (trainer {} of {}): {} parameters on {} PS ({} stripe(s) each), mode {}, {} updates",
      job.task_name(), rank, trainers, models::parameter_count(*model), servers, stripes,
      dist.ps.mode, total_updates);

  // The job's state as the chief would hand it to a shard: its own model, or the checkpoint.
  auto current_state = [&](int64_t version) {
    JobState s;
    s.version = version;
    s.total_updates = total_updates;
    s.trainers = trainers;
    for (const auto& p : trainable.params) s.params.push_back(p.detach().cpu());
    return s;
  };
  int64_t version = 0;
  if (chief) {
    std::filesystem::create_directories(config.model_dir);
    auto registered = client.register_trainer(rank, /*wait_until_initialized=*/false);
    std::vector<std::unique_ptr<proto::InitRequest>> requests(registered.size());
    bool any_uninitialized = false;
    for (const auto& r : registered) any_uninitialized = any_uninitialized || !r.initialized();
    if (any_uninitialized) {
      JobState state = current_state(0);
      // A restarted job (or master) continues from its newest checkpoint.
      auto restored = checkpoints.load_latest(
          *model, [&](torch::serialize::InputArchive& ar) { state = read_job_state(ar, layout); });
      if (restored) {
        state.total_updates = total_updates;
        state.trainers = trainers;
      } else {
        std::filesystem::remove(done_marker);
        train::MonitorLog::truncate_after(config.model_dir, 0);
      }
      for (size_t s = 0; s < registered.size(); ++s) {
        if (registered[s].initialized()) continue;
        requests[s] = std::make_unique<proto::InitRequest>(
            make_init_request(layout, static_cast<int>(s), state, config.optimizer));
      }
      client.initialize(requests);
    }
    // A shard that restarts later without a checkpoint gets the chief's current parameters.
    client.on_shard_lost([&](int shard) {
      spdlog::warn("PS shard {} lost its state; re-initialising it from the master's parameters",
                   shard);
      std::vector<std::unique_ptr<proto::InitRequest>> one(static_cast<size_t>(layout.shards()));
      one[static_cast<size_t>(shard)] = std::make_unique<proto::InitRequest>(
          make_init_request(layout, shard, current_state(version), config.optimizer));
      client.initialize(one);
    });
  }
  for (const auto& r : client.register_trainer(rank, /*wait_until_initialized=*/true)) {
    version = std::max(version, r.version());
  }
  version = std::max(version, client.pull(rank, trainable.host_params).version);
  trainable.upload();

  // Where this trainer starts: sync steps are global, so the position follows the version.
  int64_t epoch = version / updates_per_epoch;
  const int64_t first_batch = mode == Mode::kSync ? version % updates_per_epoch : 0;
  loader.start_epoch(epoch, first_batch);
  spdlog::info("{}: starting at version {} (epoch {}, batch {})", job.task_name(), version,
               epoch + 1, first_batch + 1);

  train::MonitorLog monitor(config.model_dir);
  train::Progress progress(train::Progress::parse_mode(config.progress), batches, config.epochs,
                           config.log_every_steps);
  progress.begin_epoch(epoch + 1);
  metrics->set_epoch(epoch + 1);

  train::TrainState state;  // the chief's epoch statistics
  state.epoch = epoch;
  state.step = version;
  int64_t reported_epoch = epoch;
  int64_t batch_in_epoch = first_batch;
  train::TrainResult result;
  train::ThroughputMeter throughput;
  int64_t last_saved = -1;

  auto save_checkpoint = [&] {
    if (last_saved == version) return;
    const auto start = Clock::now();
    auto gathered = gather_state(layout, client.get_state(), trainable.shapes);
    gathered.total_updates = total_updates;
    gathered.trainers = trainers;
    {
      torch::NoGradGuard no_grad;
      for (size_t i = 0; i < trainable.params.size(); ++i) {
        trainable.params[i].copy_(gathered.params[i]);
      }
    }
    train::TrainState saved = state;
    saved.step = gathered.version;
    checkpoints.save(*model, saved, [&](torch::serialize::OutputArchive& archive) {
      write_job_state(archive, layout, gathered);
    });
    last_saved = version;
    metrics->record_checkpoint(seconds_between(start, Clock::now()));
  };

  bool done = version >= total_updates;
  while (!done) {
    const auto t_start = Clock::now();
    auto batch = loader.next();
    if (!batch) {
      loader.start_epoch(++epoch);
      batch_in_epoch = 0;
      if (!chief) progress.begin_epoch(epoch + 1);
      continue;
    }
    const auto t_data = Clock::now();
    const double lr =
        train::learning_rate(config.schedule, version, updates_per_epoch, schedule_updates);
    auto [inputs, labels] = train::to_tensors(std::move(*batch), device);
    auto logits = model->forward(inputs);
    auto loss = train::classification_loss(logits, labels, config.label_smoothing);
    model->zero_grad();
    loss.backward();
    const auto t_backward = Clock::now();
    const auto loss_value = loss.item<double>();
    if (!std::isfinite(loss_value)) {
      throw std::runtime_error("training diverged: loss is " + std::to_string(loss_value) +
                               " at version " + std::to_string(version) + "; lower --lr (now " +
                               std::to_string(lr) + ")");
    }
    const auto exchange = client.push_pull(rank, trainable.gradients(), trainable.host_params, lr);
    trainable.upload();
    const auto t_exchange = Clock::now();
    const int64_t previous_version = version;
    version = exchange.version;
    done = exchange.done;

    const int64_t n = labels.size(0);
    ++batch_in_epoch;
    const double step_seconds = seconds_between(t_start, t_exchange);
    state.add_batch(loss_value, logits.argmax(1).eq(labels).sum().item<int64_t>(), n, step_seconds);
    throughput.add_step(n, step_seconds);
    const double accuracy = state.running_accuracy();
    const double images_per_second = state.running_images_per_second();
    metrics->record_step({step_seconds, seconds_between(t_start, t_data), n, loss_value, accuracy,
                          images_per_second});
    progress.update({batch_in_epoch, version, loss_value, accuracy, images_per_second, lr});
    result.time.data_wait += seconds_between(t_start, t_data);
    result.time.forward += seconds_between(t_data, t_backward);        // forward and backward
    result.time.optimizer += seconds_between(t_backward, t_exchange);  // push and pull
    ++result.steps;

    if (!chief) continue;
    state.step = version;
    const int64_t global_epoch = std::min(version / updates_per_epoch, config.epochs);
    if (global_epoch > reported_epoch) {
      // An epoch of the job ended: record the chief's view of it and checkpoint.
      auto record = state.epoch_record(global_epoch, lr);
      record.test_loss = std::nan("");  // the evaluator's job
      record.test_accuracy = std::nan("");
      progress.end_epoch(record);
      monitor.append(record);
      result.last_epoch = record;
      reported_epoch = global_epoch;
      state.start_epoch_after(global_epoch);
      save_checkpoint();
      if (!done) {
        progress.begin_epoch(global_epoch + 1);
        metrics->set_epoch(global_epoch + 1);
      }
    } else if (const int64_t every = config.checkpoint_every_steps;
               every > 0 && version / every > previous_version / every) {
      save_checkpoint();  // the version crossed a multiple of --checkpoint-every
    }
  }

  if (chief) {
    save_checkpoint();
    client.finish();
    train::write_done_marker(config, version);
    spdlog::info("master: job done at version {}", version);
  } else {
    spdlog::info("{}: job done at version {}", job.task_name(), version);
  }
  result.epochs_completed = std::min(version / updates_per_epoch, config.epochs);
  throughput.report(result);
  return result;
}

}  // namespace cifar::ps
