#include "cifartrainjob/operator_metrics.h"

#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

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
      leader_(&prometheus::BuildGauge()
                   .Name("cifar_operator_leader")
                   .Help("1 while this instance leads")
                   .Register(*registry_)
                   .Add({})) {
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
void OperatorMetrics::set_leader(bool leader) { leader_->Set(leader ? 1 : 0); }

}  // namespace cifar::op
