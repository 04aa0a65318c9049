// The run's store as each role of a job opens it: its -md (a directory or s3://...), riding out an
// object store's outage for up to --max-unsaved-seconds (storage/retrying_store.h) before a
// request fails for good.
//
// A process opens its run's store once: the fence, the checkpoints, the monitor log and the done
// marker all go through the one instance while any of them holds it, so that its health (what the
// chief publishes) says whether the store answers this process at all, whichever request met the
// outage first (a checkpoint's write waits behind the fence's read, for one).
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

// The process's instance of the store at config.model_dir (opened anew once none holds it).
std::shared_ptr<storage::Store> open_run_store(const TrainConfig& config);

// Whether `store` answers, and the newest checkpoint step this process saved in it, on the metrics
// endpoint (contract/metrics.h: kStoreUnreachableSince, kCheckpointSavedStep, kStoreRetries).
void publish_store_health(metrics::RuntimeMetrics& metrics, const storage::Store& store,
                          std::optional<int64_t> saved_step);

}  // namespace cifar::train
