// Keeps status.progress of running jobs current: every interval it scrapes the metrics endpoint
// (the container port named "metrics") of each running master, worker and evaluator pod at its
// pod IP, concurrently and with a short timeout, and merge-patches status.progress when it
// changed. A pod that does not answer is skipped until the next round.
#pragma once

#include <atomic>
#include <chrono>

#include "framework/informer.h"
#include "kube/client.h"

namespace cifar::op {

class ProgressScraper {
 public:
  // `pods`: indexed by "namespace/job" (the controller's pod informer).
  ProgressScraper(kube::Client& client, const Informer& jobs, const Informer& pods,
                  std::chrono::milliseconds interval);

  void run(const std::atomic<bool>& stop);  // until `stop`
  void scrape_once();

 private:
  kube::Client& client_;
  const Informer& jobs_;
  const Informer& pods_;
  std::chrono::milliseconds interval_;
};

}  // namespace cifar::op
