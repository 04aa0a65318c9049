#include "cifartrainjob/elastic.h"

#include <string>

#include "cifartrainjob/desired_state.h"
#include "contract/labels.h"

namespace cifar::op {

void keep_rendezvous_store(const Job& job, const PodsByName& pods, Plan& plan) {
  if (!job.spec.elastic()) return;
  const auto name = rendezvous_store_name(job);
  const auto* store = find_pod(pods, name);
  if (store == nullptr) {
    plan.create_pods.push_back(desired_rendezvous_store(job));
    return;
  }
  if (!pod_terminating(*store) && pod_phase(*store) == PodPhase::kFailed) {
    plan.delete_pods.push_back(name);
    plan.events.push_back({"Warning", std::string(reason::kPodRestarting),
                           "the rendezvous store " + name +
                               " failed; recreating it (the workers wait for it, holding their "
                               "state)"});
  }
}

void retire_surplus_workers(const Job& job, const PodsByName& pods, Plan& plan) {
  if (!job.spec.elastic()) return;
  const int desired = job.spec.count(Role::kWorker);
  for (const auto& [name, pod] : pods) {
    if (pod_role(pod) != Role::kWorker || pod_terminating(pod)) continue;
    const auto index = pod_index(pod);
    if (!index || *index < desired) continue;
    plan.delete_pods.push_back(name);
    plan.events.push_back({"Normal", std::string(reason::kWorkerLeaving),
                           "worker " + name + " leaves: the job's desired size is " +
                               std::to_string(desired) +
                               " (it stops at a step boundary; the others train on)"});
  }
}

void count_workers(const Job& job, const PodsByName& pods, JobStatus& status) {
  const int desired = job.spec.count(Role::kWorker);
  if (desired == 0) return;
  int ready = 0;
  for (const auto& [name, pod] : pods) {
    if (pod_role(pod) == Role::kWorker && !pod_terminating(pod) && pod_ready(pod)) ++ready;
  }
  WorkerCount workers;
  workers.training = ready;
  workers.desired = desired;
  workers.selector = std::string(contract::label::kJobName) + "=" + job.name + "," +
                     contract::label::kReplicaType + "=" +
                     std::string(contract::role_name(Role::kWorker));
  if (ready < desired) workers.reason = "Joining";
  if (ready > desired) workers.reason = "Leaving";
  status.workers = workers;
}

}  // namespace cifar::op
