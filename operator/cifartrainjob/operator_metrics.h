// The operator's Prometheus metrics (all named cifar_operator_*), served on one port.
#pragma once

#include <memory>
#include <string>

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
  explicit OperatorMetrics(const std::string& bind_address);  // "" serves nothing
  ~OperatorMetrics();
  OperatorMetrics(const OperatorMetrics&) = delete;
  OperatorMetrics& operator=(const OperatorMetrics&) = delete;

  void record_reconcile(const std::string& result, double seconds);  // success | error | requeue
  void add_pods_created(int n);
  void add_pods_deleted(int n);
  void set_jobs(const std::string& phase, double count);
  void set_queue_depth(double depth);
  void set_leader(bool leader);

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  prometheus::Family<prometheus::Counter>* reconciles_;
  prometheus::Histogram* reconcile_seconds_;
  prometheus::Counter* pods_created_;
  prometheus::Counter* pods_deleted_;
  prometheus::Family<prometheus::Gauge>* jobs_;
  prometheus::Gauge* queue_depth_;
  prometheus::Gauge* leader_;
};

}  // namespace cifar::op
