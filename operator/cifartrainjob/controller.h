// The thin layer that carries out reconcile(): informers over CifarTrainJobs, their pods and
// Services (and the Nodes, for their health; Kueue's Workloads, for queued jobs) feed a work queue
// of job keys; workers reconcile a key from the caches and apply the plan through the API (creates
// that find the object already there, and deletes that find it gone, are success: pod names are
// deterministic, so a restarted operator never duplicates). A job waits for the cache to show its
// own creates and deletes before it is reconciled again (expectations.h).
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "cifartrainjob/operator_metrics.h"
#include "cifartrainjob/reconcile.h"
#include "framework/expectations.h"
#include "framework/informer.h"
#include "framework/node_status.h"
#include "framework/work_queue.h"
#include "kube/client.h"

namespace cifar::op {

struct ControllerOptions {
  std::string namespace_;  // "" watches every namespace
  int workers = 2;
  // How often status.progress is read from the running jobs' metrics endpoints (0: never).
  std::chrono::milliseconds progress_interval{15000};
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
  // `pod_uids`: the uids of the pods the plan was computed from, by name.
  // Throws CreateBlocked (controller.cpp) where a create is refused for now or blocked.
  void apply(const nlohmann::json& object, const Job& job, const Plan& plan,
             const std::map<std::string, std::string>& pod_uids);
  void create_objects(const Job& job, const Plan& plan);
  void update_status_and_delete(const nlohmann::json& object, const Job& job, const Plan& plan,
                                const std::map<std::string, std::string>& pod_uids);
  void record_event(const nlohmann::json& object, const EventRecord& event);
  // The progress scraper's newest reading of a job, until the reconcile has written it.
  void put_progress(const std::string& key, nlohmann::json progress);
  std::optional<nlohmann::json> progress_of(const std::string& key);
  void forget_progress(const std::string& key);
  void update_job_counts();
  // A Node changed: its trouble is recorded, and the jobs with pods on it are queued when that
  // changed.
  void note_node(const std::string& name);
  NodeTroubles troubled_nodes_of(const std::vector<nlohmann::json>& pods);
  // The Kueue Workload of a queued job's pod group, as far as the cache knows it.
  void observe_workload(const Job& job, Observed& observed);

  kube::Client& client_;
  ControllerOptions options_;
  OperatorMetrics& metrics_;
  WorkQueue queue_;
  // Written by the node informer's thread, read by the workers: before the informers, which
  // outlive their users only if declared after them.
  std::mutex nodes_mu_;
  NodeTroubles troubled_nodes_;
  std::unique_ptr<Informer> jobs_;
  std::unique_ptr<Informer> pods_;
  std::unique_ptr<Informer> services_;
  std::unique_ptr<Informer> nodes_;  // cluster-scoped: the health of the pods' nodes
  // Kueue's Workloads, watched from the first job that names a queue on (a cluster without
  // Kueue has no such resource: nothing is asked of it until a job needs it).
  std::unique_ptr<Informer> workloads_;
  std::once_flag workloads_started_;
  std::atomic<bool> ready_{false};
  Expectations expectations_;
  std::mutex progress_mu_;
  std::map<std::string, nlohmann::json> progress_;  // by job key
};

}  // namespace cifar::op
