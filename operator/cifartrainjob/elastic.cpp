#include "cifartrainjob/elastic.h"

#include <algorithm>
#include <set>
#include <string>

#include "cifartrainjob/desired_state.h"
#include "contract/labels.h"

namespace cifar::op {

void keep_rendezvous_store(const Job& job, const PodsByName& pods, Plan& plan) {
  if (!job.spec.elastic_allreduce()) return;
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

namespace {

// status.progress.world (progress.h), null when none was reported.
const nlohmann::json& world_in(const nlohmann::json& progress) {
  static const nlohmann::json kNone;
  if (!progress.is_object()) return kNone;
  const auto world = progress.find("world");
  return world == progress.end() || !world->is_object() ? kNone : *world;
}

std::set<int> workers_of(const nlohmann::json& world) {
  std::set<int> workers;
  for (const auto& index : world.value("workers", nlohmann::json::array())) {
    if (index.is_number_integer()) workers.insert(index.get<int>());
  }
  return workers;
}

// Why worker `index` left the world, as far as the operator knows.
std::string why_it_left(const Job& job, int index, const PodsByName& pods, const JobStatus& status,
                        const NodeTroubles& troubled_nodes) {
  if (index >= job.spec.count(Role::kWorker)) return "the job was scaled down";
  const auto name = pod_name(job, Role::kWorker, index);
  if (status.node_loss &&
      std::count(status.node_loss->pods.begin(), status.node_loss->pods.end(), name) > 0) {
    return "its node " + status.node_loss->node + " was lost";
  }
  const auto* pod = find_pod(pods, name);
  if (pod == nullptr) return "its pod is gone";
  if (troubled_nodes.count(pod_node(*pod)) > 0)
    return "its node " + pod_node(*pod) + " is not Ready";
  if (pod_terminating(*pod)) return "its pod is being deleted";
  return "it stopped training";
}

}  // namespace

void count_workers(const Job& job, const PodsByName& pods,
                   const std::map<int, std::string>& waiting_for_admission, Plan& plan) {
  auto& status = plan.status;
  const int desired = job.spec.count(Role::kWorker);
  if (desired == 0) return;
  const auto reason_before = status.workers ? status.workers->reason : std::string();
  int ready = 0;
  int running = 0;  // ready, or waiting for a group (a rank serves metrics only in one)
  for (const auto& [name, pod] : pods) {
    if (pod_role(pod) != Role::kWorker || pod_terminating(pod)) continue;
    ready += pod_ready(pod) ? 1 : 0;
    running += pod_phase(pod) == PodPhase::kRunning ? 1 : 0;
  }
  WorkerCount workers;
  const auto& world = world_in(status.progress);
  workers.training = job.spec.elastic() && !world.is_null() ? world.value("size", 0) : ready;
  workers.desired = desired;
  workers.selector = std::string(contract::label::kJobName) + "=" + job.name + "," +
                     contract::label::kReplicaType + "=" +
                     std::string(contract::role_name(Role::kWorker));
  if (workers.training < desired) workers.reason = "Joining";
  if (workers.training > desired) workers.reason = "Leaving";
  if (!waiting_for_admission.empty()) {
    workers.reason = reason::kWaitingForAdmission;
    for (const auto& [index, why] : waiting_for_admission) {
      workers.message += (workers.message.empty() ? "" : "; ") +
                         pod_name(job, Role::kWorker, index) + " waits in queue " + job.spec.queue +
                         " for Kueue to admit it (" + why + ")";
    }
    workers.message += "; the others train on";
    if (reason_before != reason::kWaitingForAdmission) {
      plan.events.push_back({"Normal", std::string(reason::kWaitingForAdmission), workers.message});
    }
  }
  // Fewer workers than the minimum left after the job trained: nobody trains until replacements
  // join (each worker there waits up to its rendezvous timeout, holding its state).
  const int minimum = job.spec.elastic() ? job.spec.replicas.at(Role::kWorker).min_replicas : 0;
  if (!world.is_null() && running < minimum) {
    workers.reason = reason::kBelowMinimum;
    workers.message = std::to_string(running) + (running == 1 ? " worker is" : " workers are") +
                      " running, fewer than minReplicas " + std::to_string(minimum) +
                      ": training stops until replacements join (the workers there wait for "
                      "them up to their rendezvous timeout, holding the job's state)";
    if (reason_before != reason::kBelowMinimum) {
      plan.events.push_back({"Warning", std::string(reason::kBelowMinimum), workers.message});
    }
  }
  status.workers = workers;
}

void report_world_change(const Job& job, const nlohmann::json& progress_before,
                         const PodsByName& pods, const NodeTroubles& troubled_nodes, Plan& plan) {
  const auto& world = world_in(plan.status.progress);
  const auto& world_before = world_in(progress_before);
  if (!job.spec.elastic() || world.is_null() || world_before.is_null()) return;
  const auto before = workers_of(world_before);
  const auto now = workers_of(world);
  std::string changes;
  const auto add = [&](const std::string& change) {
    changes += (changes.empty() ? "" : ", ") + change;
  };
  for (const int index : now) {
    if (before.count(index) == 0) add(pod_name(job, Role::kWorker, index) + " joined");
  }
  for (const int index : before) {
    if (now.count(index) > 0) continue;
    add(pod_name(job, Role::kWorker, index) + " left (" +
        why_it_left(job, index, pods, plan.status, troubled_nodes) + ")");
  }
  if (changes.empty()) return;
  // A parameter-server job's trainers are its workers and its master.
  const auto trainers = world.value("trainers", world.value("size", 0));
  const auto step = plan.status.progress.value("step", int64_t{-1});
  plan.events.push_back(
      {"Normal", std::string(reason::kWorldChanged),
       changes + (step >= 0 ? " at step " + std::to_string(step) : std::string()) + ": " +
           std::to_string(trainers) + (trainers == 1 ? " trainer" : " trainers")});
}

}  // namespace cifar::op
