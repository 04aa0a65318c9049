// Reads the progress of jobs that may train (Created, Running, Restarting): every interval it
// scrapes the metrics endpoint (the container port named "metrics") of each running pod of theirs
// at its pod IP, at most `concurrency` at once and each with a short timeout, and hands a job's new
// status.progress to `sink` when it differs from the one in the status, and what each pod that
// answered said of its liveness (liveness.h) to `heard`, every round. It writes nothing itself: the
// controller's reconcile writes the status (one writer, no conflicting patches). A pod that does
// not answer is skipped until the next round.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cifartrainjob/liveness.h"
#include "framework/informer.h"

namespace cifar::op {

class ProgressScraper {
 public:
  // Called with the job's key ("namespace/name") and its new status.progress.
  using Sink = std::function<void(const std::string& key, nlohmann::json progress)>;
  // Called with the job's key, the pods that answered this round and those that did not.
  using HeardSink =
      std::function<void(const std::string& key, JobLiveness answered, MissedPods missed)>;

  // `pods`: indexed by "namespace/job" (the controller's pod informer).
  ProgressScraper(const Informer& jobs, const Informer& pods, std::chrono::milliseconds interval,
                  int concurrency, Sink sink, HeardSink heard = nullptr);

  void run(const std::atomic<bool>& stop);          // until `stop`
  void scrape_once(const std::atomic<bool>& stop);  // one round; `stop` cuts it short

 private:
  const Informer& jobs_;
  const Informer& pods_;
  std::chrono::milliseconds interval_;
  int concurrency_;
  Sink sink_;
  HeardSink heard_;
};

}  // namespace cifar::op
