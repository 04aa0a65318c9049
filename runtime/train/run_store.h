// The run's store as each role of a job opens it: its -md (a directory or s3://...), riding out an
// object store's outage for up to --max-unsaved-seconds (storage/retrying_store.h) before a
// request fails for good.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "config/train_config.h"

namespace cifar::storage {
class Store;
}
namespace cifar::metrics {
class RuntimeMetrics;
}

namespace cifar::train {

std::shared_ptr<storage::Store> open_run_store(const TrainConfig& config);

// Whether `store` answers, and the newest checkpoint step this process saved in it, on the metrics
// endpoint (contract/metrics.h: kStoreUnreachableSince, kCheckpointSavedStep, kStoreRetries).
void publish_store_health(metrics::RuntimeMetrics& metrics, const storage::Store& store,
                          std::optional<int64_t> saved_step);

}  // namespace cifar::train
