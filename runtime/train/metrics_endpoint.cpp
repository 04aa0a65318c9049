#include "train/metrics_endpoint.h"

#include <spdlog/spdlog.h>

#include <string>

namespace cifar::train {

std::unique_ptr<metrics::RuntimeMetrics> make_runtime_metrics(const TrainConfig& config) {
  metrics::Identity identity{run_name(config), "master", "0"};
  int port = config.metrics_port;
  const auto& dist = config.distributed;
  if (dist.enabled) {
    identity.role = cluster::role_name(dist.job.role);
    identity.index = std::to_string(dist.job.index);
    if (dist.local && port > 0) port += cluster::local_port_offset(dist.job);
    // Ranks that share a machine (launch -n N, mpirun) each get their own port.
    if (dist.strategy == Strategy::kAllReduce && port > 0) port += dist.allreduce.local_rank;
  }
  std::string bind;
  if (port >= 0) bind = config.metrics_bind + ":" + std::to_string(port);
  auto metrics = std::make_unique<metrics::RuntimeMetrics>(identity, bind);
  if (metrics->port() != 0) spdlog::info("metrics on :{}/metrics", metrics->port());
  return metrics;
}

}  // namespace cifar::train
