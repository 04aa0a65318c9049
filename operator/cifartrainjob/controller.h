// The controller's wiring: informers over CifarTrainJobs, their pods and Services, the nodes'
// health (node_health.h) and Kueue's Workloads (workload_watch.h) feed a work queue of job keys;
// workers observe a key from the caches, reconcile it (reconcile.h, pure) and carry the plan out
// through the apply layer (applier.h). A job waits for the cache to show its own creates and
// deletes before it is reconciled again (expectations.h).
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cifartrainjob/applier.h"
#include "cifartrainjob/liveness.h"
#include "cifartrainjob/node_health.h"
#include "cifartrainjob/operator_metrics.h"
#include "cifartrainjob/reconcile.h"
#include "cifartrainjob/workload_watch.h"
#include "framework/expectations.h"
#include "framework/informer.h"
#include "framework/work_queue.h"
#include "kube/client.h"

namespace cifar::op {

struct ControllerOptions {
  std::string namespace_;  // "" watches every namespace
  int workers = 2;
  // How often status.progress is read from the running jobs' metrics endpoints (0: never).
  std::chrono::milliseconds progress_interval{15000};
  // At most this many pods' endpoints read at once (each read waits up to 2 s for an answer).
  int progress_concurrency = 64;
};

class JobController {
 public:
  JobController(kube::Client& client, ControllerOptions options, OperatorMetrics& metrics);
  ~JobController();
  JobController(const JobController&) = delete;
  JobController& operator=(const JobController&) = delete;

  // Runs until `stop` is set: informers, then workers. Returns after they have all ended.
  void run(const std::atomic<bool>& stop);
  [[nodiscard]] bool ready() const { return ready_.load(); }

 private:
  void work(const std::atomic<bool>& stop);
  // Returns when to look again (requeue_after), if at all.
  std::optional<std::chrono::seconds> reconcile_key(const std::string& key);
  // The progress scraper's newest reading of a job, until the reconcile has written it.
  void put_progress(const std::string& key, nlohmann::json progress);
  std::optional<nlohmann::json> progress_of(const std::string& key);
  void forget_progress(const std::string& key);
  // What a scrape round heard from a job's pods (liveness.h); the job looks again when that may
  // change whether it is stalled.
  void put_heard(const std::string& key, const JobLiveness& answered, const MissedPods& missed);
  JobLiveness liveness_of(const std::string& key);
  // The job's pods killed at the end of their grace period since its last round (unsaved_stop.h).
  std::vector<nlohmann::json> take_deleted_pods(const std::string& key);
  void update_job_counts();
  // The jobs with pods on node `name` look again (its trouble began, changed or ended).
  void enqueue_jobs_on_node(const std::string& name);

  kube::Client& client_;
  ControllerOptions options_;
  OperatorMetrics& metrics_;
  WorkQueue queue_;
  Expectations expectations_;
  Applier applier_{client_, expectations_, metrics_};
  std::mutex progress_mu_;
  std::map<std::string, nlohmann::json> progress_;  // by job key
  std::map<std::string, JobLiveness> liveness_;     // by job key, under progress_mu_
  std::mutex deleted_pods_mu_;
  std::map<std::string, std::vector<nlohmann::json>> deleted_pods_;  // by job key
  // The watches last: their threads call into the members above, which must outlive them.
  std::unique_ptr<Informer> jobs_;
  std::unique_ptr<Informer> pods_;
  std::unique_ptr<Informer> services_;
  NodeHealth nodes_;
  WorkloadWatch workloads_;
  std::atomic<bool> ready_{false};
};

}  // namespace cifar::op
