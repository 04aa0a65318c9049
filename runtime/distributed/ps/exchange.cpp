#include "distributed/ps/exchange.h"

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "distributed/ps/client.h"
#include "distributed/ps/job_tls.h"
#include "distributed/ps/layout.h"
#include "distributed/ps/ps_checkpoint.h"
#include "distributed/ps/shard_messages.h"
#include "distributed/ps/tensor_codec.h"
#include "metrics/seconds_since.h"
#include "models/model.h"
#include "train/done_marker.h"
#include "train/run_store.h"

namespace cifar::ps {

// The model's trainable parameters, and the host tensors the PS client reads them into and sends
// their gradients from (the client works on host memory). On the CPU those are the parameters and
// gradients themselves; on a GPU, page-locked host copies, staged each step.
class ParameterServerExchange::HostStaging {
 public:
  explicit HostStaging(torch::nn::Module& model) {
    for (auto& p : model.named_parameters()) {
      if (!p.value().requires_grad()) continue;
      infos.push_back({p.key(), p.value().numel()});
      params.push_back(p.value());
      shapes.push_back(p.value().sizes().vec());
    }
    const bool on_cpu = params.empty() || params.front().is_cpu();  // a model is on one device
    if (on_cpu) {
      host_params = params;
      return;
    }
    for (const auto& param : params) {
      const auto pinned =
          torch::TensorOptions().dtype(param.dtype()).pinned_memory(param.is_cuda());
      host_params.push_back(torch::empty(param.sizes(), pinned));
      host_grads_.push_back(torch::empty(param.sizes(), pinned));
    }
  }

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
    for (size_t i = 0; i < params.size(); ++i) host_grads_[i].copy_(params[i].grad());
    return host_grads_;
  }

  // The model takes the values the client wrote into host_params.
  void upload() {
    if (!staged()) return;
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < params.size(); ++i) {
      params[i].copy_(host_params[i], /*non_blocking=*/true);
    }
  }

  std::vector<ParameterInfo> infos;
  std::vector<torch::Tensor> params;
  std::vector<std::vector<int64_t>> shapes;
  std::vector<torch::Tensor> host_params;  // the params themselves on the CPU

 private:
  [[nodiscard]] bool staged() const { return !host_grads_.empty(); }
  std::vector<torch::Tensor> host_grads_;  // empty on the CPU
};

// An elastic synchronous job's trainer beats at PS 0 from a thread, once a second, for as long as
// it trains: a trainer that stops (killed, frozen, its node lost) holds no update back for longer
// than the PS's beat silence (ShardCore::kBeatSilence), however long its steps take.
class ParameterServerExchange::Beat {
 public:
  Beat(PsClient& client, int trainer)
      : thread_([this, &client, trainer] {
          std::unique_lock lock(mu_);
          while (!stopping_) {
            lock.unlock();
            static_cast<void>(client.beat(trainer));
            lock.lock();
            wake_.wait_for(lock, std::chrono::seconds(1), [this] { return stopping_; });
          }
        }) {}
  ~Beat() {
    {
      const std::lock_guard lock(mu_);
      stopping_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  Beat(const Beat&) = delete;
  Beat& operator=(const Beat&) = delete;

 private:
  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;  // last: starts once the rest is there
};

namespace {

ClientOptions client_options(const train::TrainConfig& config, int stripes) {
  const auto& ps = config.distributed.ps;
  ClientOptions o;
  o.addresses = config.distributed.job.cluster.ps;
  o.stripes = stripes;
  o.token = ps.token;
  o.tls = job_credentials(ps, ChannelEnd::kCalls);
  o.max_message_bytes = ps.max_message_mb << 20;
  o.wire_dtype = wire_dtype(ps.wire_dtype);
  o.retry_seconds = ps.retry_seconds;
  // A sync round may wait --ps-timeout for a silent trainer before it goes on.
  o.call_seconds = 2 * ps.timeout_seconds + 60;
  if (config.incarnation > 0) {
    o.member = Member{config.distributed.job.trainer_rank(), config.incarnation};
  }
  o.ps_incarnations = config.ps_incarnations;
  return o;
}

}  // namespace

ParameterServerExchange::ParameterServerExchange(const train::TrainConfig& config,
                                                 train::Fence fence)
    : config_(config),
      mode_(config.distributed.ps.mode),
      checkpoints_(train::open_run_store(config), train::run_name(config), config.keep_checkpoints,
                   std::move(fence)) {}

ParameterServerExchange::~ParameterServerExchange() = default;

train::TrainerPlace ParameterServerExchange::place() const {
  const auto& job = config_.distributed.job;
  // An elastic synchronous job's trainer reads its slot of each update's global batch.
  if (planned()) {
    return {plan_.slot(), plan_.size(), job.is_chief(), /*in_lockstep=*/false};
  }
  return {job.trainer_rank(), job.trainer_count(), job.is_chief(), /*in_lockstep=*/false};
}

bool ParameterServerExchange::elastic() const { return config_.distributed.ps.min_trainers > 0; }

bool ParameterServerExchange::planned() const { return places_its_trainer(plan_); }

void ParameterServerExchange::take_plan(const proto::SyncPlan& plan) {
  if (mode_ != Mode::kSync || !elastic()) return;
  if (plan.size() != plan_.size() || plan.slot() != plan_.slot()) {
    spdlog::info("{}: from update {} slot {} of {} trainers", config_.distributed.job.task_name(),
                 plan.version() + 1, plan.slot(), plan.size());
  }
  plan_ = plan;
}

void ParameterServerExchange::wait_for_a_plan() {
  const auto pulled =
      client_->pull_when_planned(config_.distributed.job.trainer_rank(), staging_->host_params);
  staging_->upload();
  version_ = pulled.version;
  take_plan(pulled.plan);
}

int64_t ParameterServerExchange::updates_per_epoch(int64_t batches) const {
  return mode_ == Mode::kSync ? batches : batches * place().count;
}

JobState ParameterServerExchange::current_state() const {
  JobState s;
  s.version = version_;
  s.total_updates = total_updates_;
  s.trainers = config_.distributed.job.trainer_count();
  s.min_trainers = config_.distributed.ps.min_trainers;
  for (const auto& p : staging_->params) s.params.push_back(p.detach().cpu());
  return s;
}

train::TrainState ParameterServerExchange::start(const train::TrainableModel& model,
                                                 const train::UpdatePlan& plan,
                                                 metrics::RuntimeMetrics& metrics) {
  const auto& dist = config_.distributed;
  const auto trainer = place();
  model_ = model.model;
  total_updates_ = plan.total_updates;
  staging_ = std::make_unique<HostStaging>(*model_);
  const int servers = static_cast<int>(dist.job.cluster.ps.size());
  stripes_ = stripes_per_server(staging_->infos, servers, dist.ps.stripes);
  auto options = client_options(config_, stripes_);
  if (trainer.chief) options.total_updates = total_updates_;
  client_ = std::make_unique<PsClient>(std::move(options),
                                       ShardLayout(staging_->infos, servers * stripes_), &metrics);
  const auto& layout = client_->layout();

  if (trainer.chief) {
    auto registered = client_->register_trainer(trainer.rank, /*wait_until_initialized=*/false);
    std::vector<std::unique_ptr<proto::InitRequest>> requests(registered.size());
    bool any_uninitialized = false;
    for (const auto& r : registered) any_uninitialized = any_uninitialized || !r.initialized();
    if (any_uninitialized) {
      JobState state = current_state();
      // A restarted job (or master) continues from its newest checkpoint.
      auto restored = checkpoints_.load_latest(
          *model_, [&](torch::serialize::InputArchive& ar) { state = read_job_state(ar, layout); });
      if (restored) {
        state.total_updates = total_updates_;
        state.trainers = config_.distributed.job.trainer_count();
        state.min_trainers = config_.distributed.ps.min_trainers;
      } else {
        train::remove_done_marker(config_);
      }
      for (size_t s = 0; s < registered.size(); ++s) {
        if (registered[s].initialized()) continue;
        requests[s] = std::make_unique<proto::InitRequest>(
            make_init_request(layout, static_cast<int>(s), state, config_.optimizer));
      }
      client_->initialize(requests);
    }
    // A shard that restarts later without a checkpoint gets the chief's current parameters.
    client_->on_shard_lost([this, &layout](int shard) {
      spdlog::warn("PS shard {} lost its state; re-initialising it from the master's parameters",
                   shard);
      std::vector<std::unique_ptr<proto::InitRequest>> one(static_cast<size_t>(layout.shards()));
      one[static_cast<size_t>(shard)] = std::make_unique<proto::InitRequest>(
          make_init_request(layout, shard, current_state(), config_.optimizer));
      client_->initialize(one);
    });
  }
  for (const auto& r : client_->register_trainer(trainer.rank, /*wait_until_initialized=*/true)) {
    version_ = std::max(version_, r.version());
  }
  version_ = std::max(version_, client_->pull(trainer.rank, staging_->host_params).version);
  staging_->upload();
  // An elastic synchronous job's trainer trains from the first update whose plan holds it.
  if (mode_ == Mode::kSync && elastic()) {
    beat_ = std::make_unique<Beat>(*client_, dist.job.trainer_rank());
    wait_for_a_plan();
  }

  // Sync steps are global, so this trainer's place in the epoch follows the version.
  train::TrainState state;
  state.step = version_;
  state.epoch = version_ / plan.updates_per_epoch;
  state.batch_in_epoch = mode_ == Mode::kSync ? version_ % plan.updates_per_epoch : 0;
  spdlog::info("{}: starting at version {} (epoch {}, batch {})", dist.job.task_name(), version_,
               state.epoch + 1, state.batch_in_epoch + 1);
  return state;
}

std::string ParameterServerExchange::describe() const {
  const auto trainer = place();
  return fmt::format("{} (trainer {} of {}) on {} PS ({} stripe(s) each), mode {}, {} updates",
                     config_.distributed.job.task_name(), trainer.rank, trainer.count,
                     config_.distributed.job.cluster.ps.size(), stripes_, mode_name(mode_),
                     total_updates_);
}

train::UpdateResult ParameterServerExchange::update(double lr, const train::SampleTally& trained) {
  const auto start = std::chrono::steady_clock::now();
  const auto rank = config_.distributed.job.trainer_rank();
  if (mode_ == Mode::kSync && elastic() && !planned()) {
    // Left out of the plans (dropped after a silence): from the first update that holds it again.
    wait_for_a_plan();
    train::UpdateResult moved{version_, false, metrics::seconds_since(start), std::nullopt};
    moved.redo = true;
    return moved;
  }
  PushNote note;
  note.plan = plan_;
  note.samples.set_count(trained.count);
  note.samples.set_index_sum(trained.index_sum);
  note.samples.set_index_square_sum(trained.index_square_sum);
  const auto pulled =
      client_->push_pull(rank, staging_->gradients(), staging_->host_params, lr, note);
  staging_->upload();
  version_ = pulled.version;
  if (!pulled.stopping) saved_for_stopping_ = false;
  shard_stopping_ = pulled.stopping;
  take_plan(pulled.plan);
  train::UpdateResult result{version_, pulled.done, metrics::seconds_since(start), std::nullopt};
  result.redo = pulled.redo && !pulled.done;
  if (pulled.samples && !result.redo) {
    result.samples = train::SampleTally{pulled.samples->count(), pulled.samples->index_sum(),
                                        pulled.samples->index_square_sum()};
  }
  return result;
}

bool ParameterServerExchange::agree_to_stop(bool asked) {
  // An elastic job's worker asked to stop (scaled down) leaves: no update waits for it.
  if (asked && elastic() && !place().chief) {
    client_->leave(config_.distributed.job.trainer_rank());
    spdlog::info("{}: left the job at version {}", config_.distributed.job.task_name(), version_);
  }
  return asked;
}

bool ParameterServerExchange::wants_checkpoint() const {
  return place().chief && shard_stopping_ && !saved_for_stopping_;
}

void ParameterServerExchange::save_checkpoint(const train::TrainState& state) {
  auto gathered = gather_state(client_->layout(), client_->get_state(), staging_->shapes);
  gathered.total_updates = total_updates_;
  gathered.trainers = config_.distributed.job.trainer_count();
  gathered.min_trainers = config_.distributed.ps.min_trainers;
  {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < staging_->params.size(); ++i) {
      staging_->params[i].copy_(gathered.params[i]);
    }
  }
  train::TrainState saved = state;
  saved.step = gathered.version;
  checkpoints_.save(*model_, saved, [&](torch::serialize::OutputArchive& archive) {
    write_job_state(archive, client_->layout(), gathered);
  });
  saved_step_ = saved.step;
  if (shard_stopping_) {
    saved_for_stopping_ = true;
    spdlog::info("a PS is stopping: its state is saved at version {}", saved.step);
  }
}

void ParameterServerExchange::finish(const train::TrainState& state) {
  if (place().chief) {
    client_->finish();
    train::write_done_marker(config_, checkpoints_.fence(),
                             saved_step_ >= 0 ? saved_step_ : state.step);
  }
  spdlog::info("{}: job done at version {}", config_.distributed.job.task_name(), state.step);
}

}  // namespace cifar::ps
