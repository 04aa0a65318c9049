#include "cifartrainjob/node_loss.h"

#include <algorithm>

#include "framework/pod_status.h"

namespace cifar::op {
namespace {

using std::chrono::seconds;

// When a pod on a node in trouble is replaced: at once on a node out of service, else once the
// node has been not Ready for the run policy's grace; an elastic job's pods as soon as the node is
// not Ready (its workers go on without a lost one and meet at a store that must be back for them,
// and a pod replaced wrongly is outranked by the rounds after it: docs/ARCHITECTURE.md).
Time replace_at(const NodeTrouble& trouble, const JobSpec& spec) {
  if (trouble.out_of_service) return Time{};
  return spec.elastic() ? trouble.since : trouble.since + seconds(spec.node_failure_grace_seconds);
}

}  // namespace

const NodeTrouble* trouble_of(const nlohmann::json& pod, const NodeTroubles& troubled) {
  const auto found = troubled.find(pod_node(pod));
  return found == troubled.end() ? nullptr : &found->second;
}

std::string describe_trouble(const std::string& node, const NodeTrouble& trouble) {
  if (trouble.out_of_service) return "is on node " + node + ", which is out of service";
  std::string text = "is on node " + node + ", not Ready since " + format_time(trouble.since) +
                     " (" + trouble.reason;
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
                           "pod " + name + " " + describe_trouble(pod_node(pod), *trouble) +
                               ": deleting it for good and creating it again on a live node "
                               "(not counted against backoffLimit)"});
  }
  return replaced;
}

namespace {

int64_t progress_step(const JobStatus& status) {
  return status.progress.is_object() ? status.progress.value("step", int64_t{-1}) : -1;
}

}  // namespace

void note_node_loss(const PodsByName& pods, const std::set<std::string>& replaced,
                    Clock::time_point now, JobStatus& status) {
  if (replaced.empty()) return;
  if (!status.node_loss) {
    auto& loss = status.node_loss.emplace();
    loss.step = progress_step(status);
    loss.since = to_time(now);
  }
  auto& loss = *status.node_loss;
  for (const auto& name : replaced) {
    if (!listed(loss.pods, name)) loss.pods.push_back(name);
    if (const auto* pod = find_pod(pods, name)) loss.node = pod_node(*pod);
  }
}

void forget_node_loss_once_training(JobStatus& status) {
  if (status.node_loss && progress_step(status) != status.node_loss->step) status.node_loss.reset();
}

std::string describe_node_loss(const NodeLoss& loss, Clock::time_point now) {
  std::string pods;
  for (const auto& name : loss.pods) pods += (pods.empty() ? "" : ", ") + name;
  const auto ago =
      std::max<int64_t>(0, std::chrono::duration_cast<seconds>(now - loss.since).count());
  std::string text = (loss.pods.size() == 1 ? "pod " + pods + " was" : "pods " + pods + " were") +
                     " replaced " + std::to_string(ago) + " s ago, after node " + loss.node +
                     " was lost; the job has not trained since";
  if (loss.step >= 0) text += " (step " + std::to_string(loss.step) + ")";
  return text;
}

}  // namespace cifar::op
