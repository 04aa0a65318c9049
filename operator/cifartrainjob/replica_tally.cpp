#include "cifartrainjob/replica_tally.h"

#include "cifartrainjob/desired_state.h"
#include "contract/exit_codes.h"
#include "framework/pod_status.h"

namespace cifar::op {
namespace {

bool retryable(const JobSpec& spec, const std::optional<int>& code) {
  if (code && contract::is_refusal(*code)) return false;
  return spec.restart_policy == RestartPolicy::kOnFailure ||
         (spec.restart_policy == RestartPolicy::kExitCode &&
          (!code || contract::is_retryable_exit(*code)));
}

}  // namespace

ReplicaTally tally_replicas(const Job& job, const PodsByName& pods,
                            const std::set<std::string>& leaving) {
  const auto& spec = job.spec;
  ReplicaTally tally;
  for (const auto role : kRoles) {
    const int n = spec.count(role);
    if (n == 0) continue;
    ReplicaStatus counts;
    for (int i = 0; i < n; ++i) {
      const auto name = pod_name(job, role, i);
      const auto found = pods.find(name);
      if (found == pods.end()) {
        tally.missing.emplace_back(role, i);
        tally.all_exist = false;
        continue;
      }
      const auto& pod = found->second;
      if (pod_terminating(pod) || leaving.count(name) > 0) {
        tally.all_exist = false;  // recreated once it is gone
        continue;
      }
      const auto phase = pod_phase(pod);
      // Restarted in place (restartPolicy OnFailure, the kubelet's) after its store or its
      // dataset refused: a restart meets the same refusal, so the job ends as if the pod had
      // failed for good.
      if (const auto code = pod_exit_code(pod);
          phase != PodPhase::kFailed && code && contract::is_refusal(*code)) {
        tally.permanent = FailedPod{name, code};
        return tally;
      }
      if (phase == PodPhase::kSucceeded) {
        ++counts.succeeded;
      } else if (phase != PodPhase::kFailed) {
        ++counts.active;
        if (pod_ready(pod)) ++counts.ready;
        tally.any_running = tally.any_running || phase == PodPhase::kRunning;
      } else if (pod_exit_code(pod) == contract::kExitStopped) {
        tally.stopped.push_back(name);
      } else if (FailedPod failed{name, pod_exit_code(pod)}; retryable(spec, failed.exit_code)) {
        ++counts.failed;
        tally.retryable.push_back(std::move(failed));
      } else {
        tally.permanent = std::move(failed);
        return tally;
      }
    }
    tally.statuses[std::string(replica_type(role))] = counts;
  }
  return tally;
}

}  // namespace cifar::op
