#include "distributed/ps/shard_core.h"

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <algorithm>

#include "distributed/ps/tensor_codec.h"
#include "health/heartbeat.h"
#include "metrics/runtime_metrics.h"

namespace cifar::ps {

ShardCore::ShardCore(ShardOptions shard_options, metrics::RuntimeMetrics* runtime_metrics,
                     bool serves_lock_free)
    : options(shard_options),
      lock_free(serves_lock_free),
      name("shard " + std::to_string(shard_options.index) +
           (shard_options.stripe > 0 ? " stripe " + std::to_string(shard_options.stripe) : "")),
      metrics(runtime_metrics) {}

int64_t ShardCore::member_count() const {
  int64_t n = 0;
  for (int t = 0; t < trainers; ++t) n += is_member(t) ? 1 : 0;
  return n;
}

std::vector<int> ShardCore::not_joined() const {
  std::vector<int> missing;
  for (int t = 0; t < trainers; ++t) {
    if (!joined[static_cast<size_t>(t)]) missing.push_back(t);
  }
  return missing;
}

void ShardCore::set_member(int trainer, bool member) {
  members[static_cast<size_t>(trainer)].store(member);
  publish_state();
  publish_trainer(trainer);
}

void ShardCore::publish_trainer(int trainer) {
  if (!reports_progress()) return;
  // An elastic job's trainers are the ones that came (the rest are not missed).
  if (elastic() && !joined[static_cast<size_t>(trainer)]) return;
  metrics->set_ps_trainer_training(trainer,
                                   joined[static_cast<size_t>(trainer)] && is_member(trainer));
}

void ShardCore::publish_state() {
  if (reports_progress()) metrics->set_ps_state(version.load(), member_count());
}

void ShardCore::evict(int trainer, const std::string& why) {
  spdlog::warn("{}: trainer {} dropped at version {}: {}; it rejoins when it registers again", name,
               trainer, version.load(), why);
  set_member(trainer, false);
  if (reports_progress()) {
    metrics->record_ps_eviction();
    metrics->record_ps_trainer_dropped(trainer, version.load());
  }
}

void ShardCore::apply(const torch::Tensor& grad, int64_t grad_version, double lr) {
  const int64_t staleness = std::max<int64_t>(0, version.load() - grad_version);
  // Staleness-aware SGD (Zhang et al., 2016): a gradient k updates old counts 1/k as much.
  const double rate =
      options.staleness_lr && staleness > 1 ? lr / static_cast<double>(staleness) : lr;
  // Lock-free updates write in place by design; every other mode updates under mu and replaces
  // the tensors, so replies still being sent keep the parameters they were given.
  const auto write =
      lock_free ? ShardOptimizer::Write::kInPlace : ShardOptimizer::Write::kOutOfPlace;
  optimizer->apply(0, grad, rate, write);
  version.fetch_add(1);
  health::note_progress();
  if (reports_progress()) {
    metrics->record_ps_update(staleness);
    publish_state();
  }
}

ParamsSnapshot ShardCore::snapshot(proto::DType dtype) {
  if (dtype == proto::DTYPE_UNSPECIFIED) dtype = proto::FLOAT32;
  const int64_t at = version.load();
  const bool reusable = !lock_free && last_snapshot.values.defined() &&
                        last_snapshot.version == at && last_snapshot.dtype == dtype;
  ParamsSnapshot snap;
  if (reusable) {
    snap = last_snapshot;
  } else {
    snap.version = at;
    snap.dtype = dtype;
    const auto& params = optimizer->params().front();
    // Lock-free parameters change under the reply, so it gets a copy (possibly mid-update).
    const bool shareable = !lock_free && dtype == proto::FLOAT32;
    snap.values = shareable ? params : to_wire(params, dtype);
    snap.piece_sizes = piece_sizes;
    if (!lock_free) last_snapshot = snap;
  }
  snap.done = done();
  if (metrics != nullptr) metrics->record_ps_traffic(0, static_cast<int64_t>(snap.values.nbytes()));
  return snap;
}

void ShardCore::answer(int trainer, proto::DType dtype, ParamsSnapshot* reply) {
  *reply = snapshot(dtype);
  note_told(trainer, *reply);
}

void ShardCore::note_told(int trainer, const ParamsSnapshot& reply) {
  if (!reply.done) return;
  told_done[static_cast<size_t>(trainer)] = true;
  changed.notify_all();
}

}  // namespace cifar::ps
