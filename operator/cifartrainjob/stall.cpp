#include "cifartrainjob/stall.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>

#include "cifartrainjob/desired_state.h"
#include "cifartrainjob/job_end.h"
#include "cifartrainjob/restart_count.h"
#include "contract/roles.h"
#include "framework/pod_status.h"

namespace cifar::op {
namespace {

using nlohmann::json;
using Seconds = std::chrono::duration<double>;

// A running trainer as the scraper last heard it.
struct Trainer {
  std::string name;
  const PodLiveness* heard = nullptr;
  double quiet = 0;  // seconds without progress, its silence since its last answer included
  double limit = 0;  // the stall limit it is judged by
  bool silent = false;
  bool said_stalled = false;
  bool stalled = false;
};

bool running(const json& pod) {
  return pod_phase(pod) == PodPhase::kRunning && !pod_terminating(pod);
}

// The record of `pod` itself, not of an earlier pod of its name.
const PodLiveness* heard_from(const JobLiveness& liveness, const std::string& name,
                              const json& pod) {
  const auto found = liveness.find(name);
  if (found == liveness.end()) return nullptr;
  const auto uid = pod.value("metadata", json::object()).value("uid", "");
  return found->second.uid == uid ? &found->second : nullptr;
}

std::string whole_seconds(double seconds) { return std::to_string(std::llround(seconds)) + " s"; }

double seconds_between(Clock::time_point from, Clock::time_point to) {
  return Seconds(to - from).count();
}

// How long `heard`'s pod has not answered: since its last answer, or since it runs if it never did.
double seconds_unanswered(const PodLiveness& heard, const json& pod, Clock::time_point now) {
  if (heard.answered_at) return seconds_between(*heard.answered_at, now);
  const auto since = pod_running_since(pod);
  return since ? seconds_between(*since, now) : 0;
}

// "stopped answering 301 s ago", or "never answered in 40 s running".
std::string silence(const PodLiveness& heard, const json& pod, Clock::time_point now) {
  const auto seconds = whole_seconds(seconds_unanswered(heard, pod, now));
  return heard.answered_at ? "stopped answering " + seconds + " ago"
                           : "never answered in " + seconds + " running";
}

// "j-worker-1 at step 120 (40 behind) [stopped answering 301 s ago]".
std::string describe(const Trainer& t, const json& pod, int64_t most_steps, Clock::time_point now) {
  if (!t.heard->answered_at) return t.name + " [" + silence(*t.heard, pod, now) + "]";
  auto text = t.name + " at step " + std::to_string(t.heard->steps);
  if (t.heard->steps < most_steps) {
    text += " (" + std::to_string(most_steps - t.heard->steps) + " behind)";
  }
  if (t.silent) return text + " [" + silence(*t.heard, pod, now) + "]";
  if (!t.heard->stall_report.empty()) return text + " [" + t.heard->stall_report + "]";
  return text + " [no progress for " + whole_seconds(t.quiet) + "]";
}

// How long until every pod of the job is there and has been running for at least `limit`;
// nullopt once it is. 0: not known when (a pod missing or not running yet: its own events bring
// the job back).
std::optional<std::chrono::seconds> until_settled(const Job& job, const PodsByName& pods,
                                                  double limit, Clock::time_point now) {
  if (static_cast<int>(pods.size()) < pod_count(job.spec)) return std::chrono::seconds(0);
  double longest = 0;
  for (const auto& [name, pod] : pods) {
    if (pod_phase(pod) == PodPhase::kSucceeded) continue;
    const auto since = pod_running_since(pod);
    if (!running(pod) || !since) return std::chrono::seconds(0);
    longest = std::max(longest, limit - seconds_between(*since, now));
  }
  if (longest <= 0) return std::nullopt;
  return std::chrono::seconds(std::llround(std::ceil(longest)) + 1);
}

// Charges the stall to the nodes of the pods it is pinned on; a node's kSuspectAfterStalls-th makes
// it suspect (status.suspectNodes), which the job's pods made from now on avoid.
void charge_nodes(const StallVerdict& verdict, const PodsByName& pods, Plan& plan) {
  std::map<std::string, std::vector<std::string>> pods_by_node;
  for (const auto& name : verdict.pinned_on) {
    const auto node = pod_node(pods.at(name));
    if (!node.empty()) pods_by_node[node].push_back(name);
  }
  auto& status = plan.status;
  for (const auto& [node, pinned] : pods_by_node) {
    if (!status.stalls_by_node) status.stalls_by_node.emplace();
    auto& stalls = (*status.stalls_by_node)[node];
    if (++stalls != kSuspectAfterStalls) continue;
    if (!status.suspect_nodes) status.suspect_nodes.emplace();
    auto& suspect = *status.suspect_nodes;
    if (!listed(suspect, node)) suspect.push_back(node);
    std::string names;
    for (const auto& name : pinned) names += (names.empty() ? "" : ", ") + name;
    plan.events.push_back({"Warning", std::string(reason::kNodeSuspect),
                           "node " + node + " is suspect: the job stalled there " +
                               std::to_string(stalls) + " times (now " + names +
                               "); the job's pods made from now on avoid it"});
  }
}

}  // namespace

StallVerdict judge_stall(const Job& job, const PodsByName& pods, const JobLiveness& liveness,
                         Clock::time_point now) {
  StallVerdict verdict;
  std::vector<Trainer> trainers;
  std::vector<std::string> silent_others;  // parameter servers that stopped answering
  double limit = 0;
  for (const auto& [name, pod] : pods) {
    const auto role = pod_role(pod);
    // A trainer being deleted (a stop, a replacement under way): the job is not judged until its
    // group is whole again.
    if (role && contract::is_trainer(*role) && pod_terminating(pod)) return verdict;
    if (!role || !running(pod)) continue;
    const auto* heard = heard_from(liveness, name, pod);
    if (!contract::is_trainer(*role)) {
      if (heard != nullptr && heard->missed_scrapes >= kSilentAfterMissed && *role == Role::kPs) {
        silent_others.push_back(name);
      }
      continue;
    }
    // Not scraped yet, or starting (missed fewer scrapes than make it silent before its first
    // answer): nothing says it stalled.
    if (heard == nullptr) return verdict;
    Trainer t{name, heard};
    t.silent = heard->missed_scrapes >= kSilentAfterMissed;
    if (!heard->answered_at && !t.silent) return verdict;
    // No watchdog (runPolicy.stallTimeoutSeconds 0, or a runtime without one): it says nothing.
    if (!t.silent && heard->stall_limit_seconds <= 0) return verdict;
    // Its time without progress goes on while it does not answer: a trainer stopped dead says
    // nothing, and its quiet passes its limit all the same.
    t.quiet = heard->seconds_since_progress + seconds_unanswered(*heard, pod, now);
    t.said_stalled = !heard->stall_report.empty();
    if (!t.silent) limit = std::max(limit, heard->stall_limit_seconds);
    trainers.push_back(t);
  }
  if (trainers.empty() || limit <= 0) return verdict;  // none answers: nothing to judge by
  // A silent trainer is judged by the limit the trainers that answer apply: its own last word may
  // be its start-up floor (no step yet) long left behind, or none (stopped before it answered).
  for (auto& t : trainers) {
    t.limit = t.silent ? limit : t.heard->stall_limit_seconds;
    t.stalled = t.said_stalled || t.quiet > t.limit;
  }
  verdict.limit_seconds = limit;
  // Said by a trainer that answered the last scrape: an old report of one gone silent since does
  // not count (every pod silent is the operator's trouble as likely as the job's).
  const bool said_now = std::any_of(trainers.begin(), trainers.end(), [](const Trainer& t) {
    return t.said_stalled && t.heard->missed_scrapes == 0;
  });
  const bool all_stalled =
      std::all_of(trainers.begin(), trainers.end(), [](const Trainer& t) { return t.stalled; });
  verdict.progressing = !all_stalled;
  if (!said_now) return verdict;
  if (!all_stalled) {
    // A silent trainer's quiet passes its limit with no word from it: look again then.
    double sooner = std::numeric_limits<double>::max();
    for (const auto& t : trainers) {
      if (!t.stalled) sooner = std::min(sooner, t.limit - t.quiet);
    }
    if (sooner < std::numeric_limits<double>::max()) {
      verdict.look_again_in =
          std::chrono::seconds(std::llround(std::ceil(std::max(sooner, 0.0))) + 1);
    }
    return verdict;
  }
  verdict.stalled = true;
  double least_quiet = std::numeric_limits<double>::max();
  int64_t most_steps = 0;
  for (const auto& t : trainers) {
    least_quiet = std::min(least_quiet, t.quiet);
    most_steps = std::max(most_steps, t.heard->steps);
  }
  verdict.message = "no trainer has progressed for " + whole_seconds(least_quiet) +
                    " (stall limit " + whole_seconds(limit) + "): ";
  for (size_t i = 0; i < trainers.size(); ++i) {
    const auto& t = trainers[i];
    verdict.message += (i == 0 ? "" : "; ") + describe(t, pods.at(t.name), most_steps, now);
  }
  for (const auto& name : silent_others) {
    const auto& pod = pods.at(name);
    verdict.message += "; " + name + " " + silence(*heard_from(liveness, name, pod), pod, now);
  }
  // What to replace: the group of an all-reduce job; the pods of a parameter-server job that
  // stopped answering (a stopped PS holds every trainer), else its trainers.
  std::vector<std::string> silent;
  for (const auto& t : trainers) {
    if (t.silent) silent.push_back(t.name);
  }
  silent.insert(silent.end(), silent_others.begin(), silent_others.end());
  verdict.pinned_on = silent;
  if (silent.empty()) {
    for (const auto& t : trainers) {
      if (t.heard->answered_at && t.heard->steps < most_steps) verdict.pinned_on.push_back(t.name);
    }
  }
  std::sort(verdict.pinned_on.begin(), verdict.pinned_on.end());
  if (job.spec.parameter_server && !silent.empty()) {
    verdict.to_replace = silent;
  } else {
    for (const auto& t : trainers) verdict.to_replace.push_back(t.name);
  }
  std::sort(verdict.to_replace.begin(), verdict.to_replace.end());
  return verdict;
}

void reconcile_stall(const Job& job, const PodsByName& pods, const JobLiveness& liveness,
                     Clock::time_point now, Plan& plan) {
  auto& status = plan.status;
  const auto verdict = judge_stall(job, pods, liveness, now);
  if (verdict.look_again_in) look_again_in(plan, *verdict.look_again_in);
  const bool was_stalled = status.is_true(ConditionType::kStalled);
  if (!verdict.stalled) {
    // Cleared on a trainer's word only: a group being replaced, or not heard yet, says nothing.
    if (!was_stalled || !verdict.progressing) return;
    const std::string message = "no trainer of the job is stalled now";
    status.set_condition(ConditionType::kStalled, false, reason::kProgressing, message,
                         to_time(now));
    plan.events.push_back({"Normal", std::string(reason::kProgressing), message});
    return;
  }
  const auto policy = "runPolicy.onStall " + name_of(kOnStallNames, job.spec.on_stall);
  if (!was_stalled) {
    status.set_condition(ConditionType::kStalled, true, reason::kTrainersStalled, verdict.message,
                         to_time(now));
  }
  switch (job.spec.on_stall) {
    case OnStall::kFail:
      finish(job, pods, false, reason::kTrainersStalled, verdict.message + "; " + policy, now,
             plan);
      return;
    case OnStall::kReport:
      if (!was_stalled) {
        plan.events.push_back({"Warning", std::string(reason::kTrainersStalled),
                               verdict.message + "; " + policy + ": reported only"});
      }
      return;
    case OnStall::kRestart:
      break;
  }
  // Once every pod has run a whole limit: a pod replaced for an earlier stall gets its chance to
  // set the others moving (their stall reports stand until they progress).
  if (const auto wait = until_settled(job, pods, verdict.limit_seconds, now)) {
    if (!was_stalled) {
      plan.events.push_back({"Warning", std::string(reason::kTrainersStalled),
                             verdict.message + "; " + policy +
                                 ": replacing the stalled pods once every pod of the job has "
                                 "run a whole stall limit"});
    }
    if (*wait > std::chrono::seconds(0)) look_again_in(plan, *wait);
    return;
  }
  // One restart of the job a stall, charged to the first pod it replaces.
  plan.delete_pods.insert(plan.delete_pods.end(), verdict.to_replace.begin(),
                          verdict.to_replace.end());
  const auto restarts = charge_recreation(pods.at(verdict.to_replace.front()), status);
  plan.restarts = restarts;
  std::string replaced;
  for (const auto& name : verdict.to_replace) replaced += (replaced.empty() ? "" : ", ") + name;
  if (restarts > job.spec.backoff_limit) {
    fail_past_backoff_limit(job, pods, restarts, "; the last for a stall: " + verdict.message, now,
                            plan);
    return;
  }
  charge_nodes(verdict, pods, plan);
  plan.events.push_back({"Warning", std::string(reason::kTrainersStalled),
                         verdict.message + "; replacing " + replaced + " (restart " +
                             std::to_string(restarts) + "), to resume from the newest checkpoint"});
}

}  // namespace cifar::op
