#include "cifartrainjob/operator_metrics.h"

#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <algorithm>

namespace cifar::op {

OperatorMetrics::OperatorMetrics(const std::string& bind_address)
    : registry_(std::make_shared<prometheus::Registry>()),
      reconciles_(&prometheus::BuildCounter()
                       .Name("cifar_operator_reconciles_total")
                       .Help("Reconciles by result")
                       .Register(*registry_)),
      reconcile_seconds_(
          &prometheus::BuildHistogram()
               .Name("cifar_operator_reconcile_seconds")
               .Help("Time one reconcile took")
               .Register(*registry_)
               .Add({}, prometheus::Histogram::BucketBoundaries{0.001, 0.005, 0.01, 0.05, 0.1, 0.5,
                                                                1, 5})),
      pods_created_(&prometheus::BuildCounter()
                         .Name("cifar_operator_pods_created_total")
                         .Help("Pods created")
                         .Register(*registry_)
                         .Add({})),
      pods_deleted_(&prometheus::BuildCounter()
                         .Name("cifar_operator_pods_deleted_total")
                         .Help("Pods deleted")
                         .Register(*registry_)
                         .Add({})),
      jobs_(&prometheus::BuildGauge()
                 .Name("cifar_operator_jobs")
                 .Help("CifarTrainJobs by state")
                 .Register(*registry_)),
      queue_depth_(&prometheus::BuildGauge()
                        .Name("cifar_operator_workqueue_depth")
                        .Help("Jobs waiting for a reconcile")
                        .Register(*registry_)
                        .Add({})),
      delayed_depth_(&prometheus::BuildGauge()
                          .Name("cifar_operator_workqueue_delayed")
                          .Help("Jobs waiting for a later reconcile (a deadline, a retry)")
                          .Register(*registry_)
                          .Add({})),
      leader_(&prometheus::BuildGauge()
                   .Name("cifar_operator_leader")
                   .Help("1 while this instance leads")
                   .Register(*registry_)
                   .Add({})),
      job_pods_(&prometheus::BuildGauge()
                     .Name("cifar_operator_job_pods")
                     .Help("Pods of a CifarTrainJob by replica type and phase")
                     .Register(*registry_)),
      job_restarts_(&prometheus::BuildGauge()
                         .Name("cifar_operator_job_restarts")
                         .Help("Restarts of a CifarTrainJob as backoffLimit counts them: pods "
                               "recreated plus in-place restarts of its pods")
                         .Register(*registry_)) {
  if (!bind_address.empty()) {
    exposer_ = std::make_unique<prometheus::Exposer>(bind_address);
    exposer_->RegisterCollectable(registry_);
  }
}

OperatorMetrics::~OperatorMetrics() = default;

void OperatorMetrics::record_reconcile(const std::string& result, double seconds) {
  reconciles_->Add({{"result", result}}).Increment();
  reconcile_seconds_->Observe(seconds);
}

void OperatorMetrics::add_pods_created(int n) { pods_created_->Increment(n); }
void OperatorMetrics::add_pods_deleted(int n) { pods_deleted_->Increment(n); }
void OperatorMetrics::set_jobs(const std::string& phase, double count) {
  jobs_->Add({{"state", phase}}).Set(count);
}
void OperatorMetrics::set_queue_depth(double depth) { queue_depth_->Set(depth); }
void OperatorMetrics::set_delayed_depth(double depth) { delayed_depth_->Set(depth); }
void OperatorMetrics::set_leader(bool leader) { leader_->Set(leader ? 1 : 0); }

namespace {

prometheus::Labels job_labels(const std::string& job_namespace, const std::string& job_name) {
  return {{"job_namespace", job_namespace}, {"job_name", job_name}};
}

prometheus::Labels pod_labels(const std::string& job_namespace, const std::string& job_name,
                              const std::string& replica_type, std::string_view phase) {
  auto labels = job_labels(job_namespace, job_name);
  labels["replica_type"] = replica_type;
  labels["phase"] = std::string(phase);
  return labels;
}

// Family::Remove takes the series itself: Add returns the one there.
void remove_series(prometheus::Family<prometheus::Gauge>& family,
                   const prometheus::Labels& labels) {
  family.Remove(&family.Add(labels));
}

}  // namespace

void OperatorMetrics::set_job_pods(const std::string& job_namespace, const std::string& job_name,
                                   const PodCounts& pods) {
  const std::lock_guard lock(jobs_mu_);
  auto& types = job_pod_types_[{job_namespace, job_name}];
  for (const auto& type : types) {
    if (pods.count(type) > 0) continue;
    for (const auto phase : kPodPhases) {
      remove_series(*job_pods_, pod_labels(job_namespace, job_name, type, phase));
    }
  }
  types.clear();
  for (const auto& [type, by_phase] : pods) {
    std::map<std::string_view, int> counts;
    for (const auto& [phase, n] : by_phase) {
      const bool known = std::find(kPodPhases.begin(), kPodPhases.end(), phase) != kPodPhases.end();
      counts[known ? std::string_view(phase) : "Unknown"] += n;
    }
    for (const auto phase : kPodPhases) {
      job_pods_->Add(pod_labels(job_namespace, job_name, type, phase)).Set(counts[phase]);
    }
    types.insert(type);
  }
}

void OperatorMetrics::set_job_restarts(const std::string& job_namespace,
                                       const std::string& job_name, int64_t restarts) {
  job_restarts_->Add(job_labels(job_namespace, job_name)).Set(static_cast<double>(restarts));
}

void OperatorMetrics::remove_job(const std::string& job_namespace, const std::string& job_name) {
  set_job_pods(job_namespace, job_name, {});  // removes every replica type's series
  {
    const std::lock_guard lock(jobs_mu_);
    job_pod_types_.erase({job_namespace, job_name});
  }
  remove_series(*job_restarts_, job_labels(job_namespace, job_name));
}

}  // namespace cifar::op
