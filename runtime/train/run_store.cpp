#include "train/run_store.h"

#include <chrono>

#include "metrics/runtime_metrics.h"
#include "storage/store.h"

namespace cifar::train {

std::shared_ptr<storage::Store> open_run_store(const TrainConfig& config) {
  return storage::open_store(config.model_dir, std::chrono::seconds(config.max_unsaved_seconds));
}

void publish_store_health(metrics::RuntimeMetrics& metrics, const storage::Store& store,
                          std::optional<int64_t> saved_step) {
  const auto health = store.health();
  std::optional<double> since;
  if (health.unreachable_since) {
    since = std::chrono::duration<double>(health.unreachable_since->time_since_epoch()).count();
  }
  metrics.set_checkpoint_store(saved_step, since, health.transient_failures);
}

}  // namespace cifar::train
