#include "train/run_store.h"

#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "metrics/runtime_metrics.h"
#include "storage/store.h"

namespace cifar::train {

std::shared_ptr<storage::Store> open_run_store(const TrainConfig& config) {
  static std::mutex mu;
  static std::map<std::pair<std::string, int64_t>, std::weak_ptr<storage::Store>> opened;
  const std::lock_guard guard(mu);
  auto& slot = opened[{config.model_dir, config.max_unsaved_seconds}];
  if (auto store = slot.lock()) return store;
  std::shared_ptr<storage::Store> store =
      storage::open_store(config.model_dir, std::chrono::seconds(config.max_unsaved_seconds));
  slot = store;
  return store;
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
