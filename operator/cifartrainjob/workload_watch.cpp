#include "cifartrainjob/workload_watch.h"

#include <spdlog/spdlog.h>

#include "cifartrainjob/kueue_integration.h"
#include "framework/kueue.h"

namespace cifar::op {

WorkloadWatch::WorkloadWatch(kube::Client& client, const std::string& namespace_,
                             OnChange on_change)
    : on_change_(std::move(on_change)),
      workloads_(
          client, kueue::workloads(namespace_), kube::ListOptions{},
          [this](const nlohmann::json& workload) {
            const auto& metadata = workload["metadata"];
            if (const auto job = job_name_of_pod_group(metadata.value("name", ""))) {
              on_change_(metadata.value("namespace", "") + "/" + *job);
            }
          },
          kueue::trim_workload) {}

void WorkloadWatch::observe(const Job& job, Observed& observed) {
  if (job.spec.queue.empty()) return;
  std::call_once(started_, [this] {
    spdlog::info("a job names a queue: watching Kueue's Workloads");
    workloads_.start();
  });
  observed.workload_known = workloads_.synced();
  if (const auto cached = workloads_.get(job.namespace_ + "/" + pod_group_name(job))) {
    observed.workload = kueue::workload_state(*cached);
  }
  if (!job.spec.elastic()) return;
  const auto& workers = job.spec.replicas.at(Role::kWorker);
  for (int index = workers.min_replicas; index < workers.max_replicas; ++index) {
    if (const auto cached =
            workloads_.get(job.namespace_ + "/" + worker_pod_group_name(job, index))) {
      observed.worker_workloads.emplace(index, kueue::workload_state(*cached));
    }
  }
}

}  // namespace cifar::op
