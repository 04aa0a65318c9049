// The operator's Prometheus metrics (all named cifar_operator_*), served on one port.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <utility>

namespace prometheus {
class Registry;
class Exposer;
class Counter;
class Gauge;
class Histogram;
template <typename T>
class Family;
}  // namespace prometheus

namespace cifar::op {

class OperatorMetrics {
 public:
  // The phases cifar_operator_job_pods is written for, each one, 0 when no pod is in it.
  static constexpr std::array<std::string_view, 5> kPodPhases = {"Pending", "Running", "Succeeded",
                                                                 "Failed", "Unknown"};
  // A job's pods: replica type ("ps", "master", ...) -> phase -> how many.
  using PodCounts = std::map<std::string, std::map<std::string, int>>;

  explicit OperatorMetrics(const std::string& bind_address);  // "" serves nothing
  ~OperatorMetrics();
  OperatorMetrics(const OperatorMetrics&) = delete;
  OperatorMetrics& operator=(const OperatorMetrics&) = delete;

  void record_reconcile(const std::string& result, double seconds);  // success | error | requeue
  void add_pods_created(int n);
  void add_pods_deleted(int n);
  void set_jobs(const std::string& phase, double count);
  void set_queue_depth(double depth);
  void set_delayed_depth(double depth);  // keys waiting for their time (at most one per job)
  void set_leader(bool leader);
  // Per job, labels job_namespace and job_name (Prometheus's own namespace and job labels would
  // clash): its pods by replica type and phase (a phase not in kPodPhases counts as Unknown; the
  // job's series of a replica type no longer given are removed), and the restarts backoffLimit
  // counts. remove_job drops every series of a job that is gone.
  void set_job_pods(const std::string& job_namespace, const std::string& job_name,
                    const PodCounts& pods);
  void set_job_restarts(const std::string& job_namespace, const std::string& job_name,
                        int64_t restarts);
  void remove_job(const std::string& job_namespace, const std::string& job_name);

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  prometheus::Family<prometheus::Counter>* reconciles_;
  prometheus::Histogram* reconcile_seconds_;
  prometheus::Counter* pods_created_;
  prometheus::Counter* pods_deleted_;
  prometheus::Family<prometheus::Gauge>* jobs_;
  prometheus::Gauge* queue_depth_;
  prometheus::Gauge* delayed_depth_;
  prometheus::Gauge* leader_;
  prometheus::Family<prometheus::Gauge>* job_pods_;
  prometheus::Family<prometheus::Gauge>* job_restarts_;
  std::mutex jobs_mu_;
  // The replica types each job has cifar_operator_job_pods series for, by (namespace, name).
  std::map<std::pair<std::string, std::string>, std::set<std::string>> job_pod_types_;
};

}  // namespace cifar::op
