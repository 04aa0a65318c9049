// Kueue's Workloads, watched lazily: from the first job that names a queue on (a cluster without
// Kueue has no such resource, so nothing is asked of it until a job needs it). A Workload's job is
// known from its name alone (job_name_of_pod_group), also once the pods that own it are gone.
#pragma once

#include <functional>
#include <mutex>
#include <string>

#include "api/job.h"
#include "cifartrainjob/plan.h"
#include "framework/informer.h"
#include "kube/client.h"

namespace cifar::op {

class WorkloadWatch {
 public:
  // Called, from the watch's thread, with the key ("namespace/job") of the job whose Workload
  // changed.
  using OnChange = std::function<void(const std::string& job_key)>;
  // `namespace_`: where the jobs are ("": every namespace).
  WorkloadWatch(kube::Client& client, const std::string& namespace_, OnChange on_change);

  // Observed::workload, worker_workloads and workload_known for a job with a queue (the watch
  // starts with the first such job); nothing for a job without one.
  void observe(const Job& job, Observed& observed);
  void stop() { workloads_.stop(); }

 private:
  OnChange on_change_;
  Informer workloads_;
  std::once_flag started_;
};

}  // namespace cifar::op
