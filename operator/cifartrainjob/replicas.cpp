#include "cifartrainjob/replicas.h"

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cifartrainjob/chief_success.h"
#include "cifartrainjob/desired_state.h"
#include "cifartrainjob/elastic.h"
#include "cifartrainjob/failure_wording.h"
#include "cifartrainjob/holdups.h"
#include "cifartrainjob/job_end.h"
#include "cifartrainjob/job_state.h"
#include "cifartrainjob/node_loss.h"
#include "cifartrainjob/replica_tally.h"
#include "cifartrainjob/restart_count.h"
#include "contract/exit_codes.h"
#include "framework/pod_status.h"

namespace cifar::op {
namespace {

// Why a pod's failure that ends the job does (its reason), and what the restart policy said.
std::pair<std::string_view, std::string> permanent_failure(const JobSpec& spec,
                                                           const std::optional<int>& code) {
  // A refusal is never retried: a restart would meet the same store, or the same objects.
  if (code == contract::kExitStoreUnavailable) {
    return {reason::kCheckpointStoreUnavailable,
            "not retried: fix the store or checkpoint.s3 and submit the job again"};
  }
  if (code == contract::kExitDataUnavailable) {
    return {reason::kDatasetUnavailable,
            "not retried: fix the dataset's objects or its store and submit the job again"};
  }
  return {
      reason::kPodFailed,
      "restartPolicy " + name_of(kRestartPolicyNames, spec.restart_policy) +
          (spec.restart_policy == RestartPolicy::kExitCode ? " (codes 1-127 are permanent)" : "")};
}

// The token Secret, NetworkPolicy and Service, until the Service exists.
void create_job_objects(const Job& job, bool service_exists, Plan& plan) {
  if (service_exists) return;
  plan.create_token_secret = true;
  plan.create_network_policy = desired_network_policy(job);
  plan.create_service = desired_service(job);
}

// Numbers this round's pods: they outrank every pod made before, above the number the status
// recorded and any a pod shows (one whose round's status write was refused as stale). Each also
// learns the chief's number after this round (a parameter server created with it claims the run
// first: train/fence.h) and a trainer the parameter servers' (it trains against none older).
void number_new_pods(const Job& job, const PodsByName& pods, Plan& plan) {
  auto& status = plan.status;
  int64_t newest = status.incarnation.value_or(0);
  for (const auto& [name, pod] : pods) newest = std::max(newest, incarnation_of(pod));
  if (plan.create_pods.empty()) {
    if (newest > 0) status.incarnation = newest;
    return;
  }
  const int64_t round = newest + 1;
  status.incarnation = round;
  // A pod's number after this round: its pod's, or this round's if it is created now.
  const auto after_this_round = [&](const std::string& name) {
    const auto* pod = find_pod(pods, name);
    const bool created =
        std::any_of(plan.create_pods.begin(), plan.create_pods.end(),
                    [&](const nlohmann::json& made) { return made["metadata"]["name"] == name; });
    return pod != nullptr && !created ? incarnation_of(*pod) : round;
  };
  const int64_t chief_incarnation = after_this_round(chief_name(job));
  std::vector<int64_t> ps_incarnations;
  ps_incarnations.reserve(static_cast<size_t>(job.spec.count(Role::kPs)));
  for (int i = 0; i < job.spec.count(Role::kPs); ++i) {
    ps_incarnations.push_back(after_this_round(pod_name(job, Role::kPs, i)));
  }
  for (auto& pod : plan.create_pods) {
    stamp_incarnation(pod, round);
    stamp_chief_incarnation(pod, chief_incarnation);
    const auto role = pod_role(pod);
    if (!ps_incarnations.empty() && (role == Role::kMaster || role == Role::kWorker)) {
      stamp_ps_incarnations(pod, ps_incarnations);
    }
  }
}

}  // namespace

void reconcile_replicas(const Job& job, const PodsByName& pods, const Observed& observed,
                        Clock::time_point now, Plan& plan, const std::optional<QueueWait>& queued) {
  const auto& spec = job.spec;
  auto& status = plan.status;
  const auto& foreign = observed.foreign_pods;
  create_job_objects(job, observed.service_exists, plan);
  status.model_dir = model_dir(job);
  auto tally = tally_replicas(job, pods);
  status.replica_statuses = tally.statuses;
  if (succeed_with_chief(job, pods, now, plan) == PhaseResult::kDone) return;

  // Pods on a lost node: deleted for good, and counted as leaving until the cache shows them gone.
  const auto replaced = replace_pods_on_lost_nodes(job, pods, observed.troubled_nodes, now, plan);
  if (!replaced.empty()) {
    tally = tally_replicas(job, pods, replaced);
    status.replica_statuses = tally.statuses;
    note_node_loss(pods, replaced, now, status);
  }
  forget_node_loss_once_training(status);
  if (queued && queued->blocks_creates) {
    delete_ended_workload(job, observed, plan);
  } else {
    // A parameter server learns the chief's number after this round (number_new_pods): while the
    // chief's name is held by another pod, that number is not known, and a parameter server made
    // now would hold the run for a chief older than the one made later, and stop as replaced.
    const bool chief_held = foreign.count(chief_name(job)) > 0;
    for (const auto& [role, index] : tally.missing) {
      // A name held by a pod the job does not control is reported (report_holdups), not taken.
      if (foreign.count(pod_name(job, role, index)) > 0) continue;
      if (role == Role::kPs && chief_held) continue;
      if (role == Role::kWorker &&
          (waits_for_the_jobs_admission(spec, index, queued) ||
           worker_waits_for_its_ended_workload(job, index, observed, plan))) {
        continue;
      }
      plan.create_pods.push_back(desired_pod(job, role, index));
      avoid_nodes(plan.create_pods.back(),
                  status.suspect_nodes.value_or(std::vector<std::string>{}));
    }
    number_new_pods(job, pods, plan);
    keep_rendezvous_store(job, pods, plan);
  }
  retire_surplus_workers(job, pods, plan);
  remove_workers_of_a_queued_job(job, pods, queued, plan);
  count_workers(job, pods, workers_waiting_for_admission(job, pods, observed), plan);
  for (const auto& name : tally.stopped) {
    plan.delete_pods.push_back(name);
    plan.events.push_back({"Normal", std::string(reason::kPodStopped),
                           "pod " + name +
                               " stopped on request with the job's state saved; recreating it "
                               "(not a restart: backoffLimit is not charged)"});
  }
  count_restarts(pods, status);
  for (const auto& failed : tally.retryable) {
    plan.delete_pods.push_back(failed.name);
    const auto* pod = find_pod(pods, failed.name);
    const auto restarts = charge_recreation(*pod, status);
    plan.events.push_back({"Warning", std::string(reason::kPodRestarting),
                           "pod " + failed.name + " failed with " +
                               describe_exit(failed.exit_code) + failure_detail(pod) +
                               "; recreating it (restart " + std::to_string(restarts) + ")"});
  }
  plan.restarts = status.restarts.value_or(0);
  if (tally.permanent) {
    const auto [why, policy] = permanent_failure(spec, tally.permanent->exit_code);
    finish(job, pods, false, why,
           "pod " + tally.permanent->name + " failed with " +
               describe_exit(tally.permanent->exit_code) +
               failure_detail(find_pod(pods, tally.permanent->name)) + "; " + policy,
           now, plan);
    return;
  }
  if (plan.restarts > spec.backoff_limit) {
    fail_past_backoff_limit(job, pods, plan.restarts, last_in_place_failure(pods), now, plan);
    return;
  }
  release_leaving_pods(pods, observed.troubled_nodes, plan);
  note_unqueued_pods(job, pods, now, plan);
  set_progressing_state(job, tally,
                        !tally.retryable.empty() || !tally.stopped.empty() || !replaced.empty(),
                        queued, now, plan);
  report_holdups(
      job, pods, foreign, observed.troubled_nodes, now, plan,
      [&](const nlohmann::json& pod) { return group_admitted_since(job, pod, observed); });
}

}  // namespace cifar::op
