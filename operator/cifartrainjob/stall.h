// A job whose trainers are alive but no longer train (a rank stopped inside a collective, a
// parameter server stopped, a data read that never returns): each trainer's own watchdog says so
// on its metrics (runtime/health/watchdog.h: its stall limit, and the summary of the stall it
// reported), the progress scraper hears it (or hears nothing from a pod that stopped answering),
// and this decides. Pure: the scraping is progress_scraper.h's.
//
// The rule: a running trainer is stalled when its watchdog reported a stall that lasts, or when
// the seconds it had been without progress at its last answer, plus the time since, pass its
// stall limit (a trainer stopped dead answers nothing; one that missed two scrapes is judged by
// the limit of those that answer, and one that never answered by its time running). The job is
// Stalled when every running trainer is stalled and at least one that answered the last scrape
// said so itself (a job the operator cannot reach at all is no stall of the job's). Waits by
// design (an all-reduce group forming, the final save, a graceful stop) are no progress missed:
// the runtime counts them as progress, and pods being deleted are left out. Only a Running job is
// judged.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "api/job.h"
#include "cifartrainjob/liveness.h"
#include "cifartrainjob/plan.h"
#include "framework/clock.h"

namespace cifar::op {

struct StallVerdict {
  bool stalled = false;
  // Some running trainer, every one heard, is not stalled: the word that clears the condition
  // (false also when the job cannot be judged: a trainer not heard yet, or being deleted).
  bool progressing = false;
  double limit_seconds = 0;  // the longest stall limit of the trainers judged
  // "no trainer has progressed for 305 s (stall limit 300 s): j-worker-1 at step 120 stopped
  // answering 301 s ago; j-master-0 at step 121: stalled: ... waiting on ..."
  std::string message;
  // The pods runPolicy.onStall Restart replaces: an all-reduce job's every running trainer (the
  // group restarts together); a parameter-server job's pods that stopped answering (a PS among
  // them), else its stalled trainers.
  std::vector<std::string> to_replace;
  // The pods the stall is pinned on, whose nodes are charged with it: those that stopped
  // answering, else the trainers behind the others; none when nothing sets a pod apart.
  std::vector<std::string> pinned_on;
  // When the verdict may change with no new word from the pods (a silent pod's quiet passes its
  // limit); nullopt: only new scrapes can change it.
  std::optional<std::chrono::seconds> look_again_in;
};
StallVerdict judge_stall(const Job& job, const PodsByName& pods, const JobLiveness& liveness,
                         Clock::time_point now);

// A node the job's stalls were pinned on this many times is suspect.
inline constexpr int64_t kSuspectAfterStalls = 2;

// Acts on the verdict for a Running job: condition Stalled True (reason TrainersStalled) with a
// Warning Event when it begins, then runPolicy.onStall (Restart: the pods to replace deleted, once
// every pod of the job has run a whole limit, as one restart charged to backoffLimit, the job
// failing BackoffLimitExceeded past it, and each replacement charged to the nodes of the pods the
// stall is pinned on: a node's second makes it suspect, with a Warning Event; Fail: the job fails
// TrainersStalled; Report: nothing more); condition False (Progressing) with a Normal Event once a
// trainer is heard progressing.
void reconcile_stall(const Job& job, const PodsByName& pods, const JobLiveness& liveness,
                     Clock::time_point now, Plan& plan);

}  // namespace cifar::op
