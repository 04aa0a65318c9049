#include "cifartrainjob/node_loss.h"

#include <algorithm>

#include "framework/pod_status.h"

namespace cifar::op {
namespace {

using std::chrono::seconds;

// When a pod on a node in trouble is replaced: at once on a node out of service, else once the
// node has been not Ready for the run policy's grace.
Time replace_at(const NodeTrouble& trouble, const JobSpec& spec) {
  return trouble.out_of_service ? Time{} : trouble.since + seconds(spec.node_failure_grace_seconds);
}

}  // namespace

const NodeTrouble* trouble_of(const nlohmann::json& pod, const NodeTroubles& troubled) {
  const auto found = troubled.find(pod_node(pod));
  return found == troubled.end() ? nullptr : &found->second;
}

std::string describe_trouble(const std::string& node, const NodeTrouble& trouble,
                             Clock::time_point now) {
  if (trouble.out_of_service) return "is on node " + node + ", which is out of service";
  const auto lost_for =
      std::max<int64_t>(0, std::chrono::duration_cast<seconds>(now - trouble.since).count());
  std::string text = "is on node " + node + ", not Ready for " + std::to_string(lost_for) + " s (" +
                     trouble.reason;
  if (!trouble.message.empty()) text += ": " + trouble.message;
  return text + ")";
}

std::set<std::string> replace_pods_on_lost_nodes(const Job& job, const PodsByName& pods,
                                                 const NodeTroubles& troubled,
                                                 Clock::time_point now, Plan& plan) {
  std::set<std::string> replaced;
  for (const auto& [name, pod] : pods) {
    const auto* trouble = trouble_of(pod, troubled);
    if (trouble == nullptr || !trouble->lost() || pod_phase(pod) == PodPhase::kSucceeded) continue;
    const auto due = replace_at(*trouble, job.spec);
    if (now < due) {
      look_again_in(plan, seconds_until(due, now));
      continue;
    }
    replaced.insert(name);
    plan.force_delete_pods.push_back(name);
    plan.events.push_back({"Warning", std::string(reason::kNodeLost),
                           "pod " + name + " " + describe_trouble(pod_node(pod), *trouble, now) +
                               ": deleting it for good and creating it again on a live node "
                               "(not counted against backoffLimit)"});
  }
  return replaced;
}

}  // namespace cifar::op
