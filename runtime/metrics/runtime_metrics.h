// The runtime's Prometheus metrics (their names: contract/metrics.h), served over HTTP by
// prometheus-cpp.
#pragma once

#include <prometheus/family.h>
#include <prometheus/gauge.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace prometheus {
class Collectable;
class Counter;
class Exposer;
class Histogram;
class Registry;
}  // namespace prometheus

namespace cifar::metrics {

// Who is reporting: the `job`, `role` and `index` labels every series carries.
struct Identity {
  std::string job = "local";
  std::string role = "master";
  std::string index = "0";
};

class RuntimeMetrics {
 public:
  // Serves /metrics at `bind_address` ("0.0.0.0:9464"; port 0 picks a free one). An empty
  // address keeps the metrics in memory without serving them.
  RuntimeMetrics(const Identity& identity, const std::string& bind_address);
  ~RuntimeMetrics();
  RuntimeMetrics(const RuntimeMetrics&) = delete;
  RuntimeMetrics& operator=(const RuntimeMetrics&) = delete;

  // The port actually listened on, 0 when not serving.
  [[nodiscard]] uint16_t port() const;

  struct Step {
    double seconds = 0;            // wall time of the whole step
    double data_wait_seconds = 0;  // of which spent waiting for the loader
    int64_t images = 0;
    double loss = 0;
    double accuracy = 0;  // running train accuracy of the epoch
    double images_per_second = 0;
  };
  void record_step(const Step& step);
  // The latest loss alone: a step that diverged (NaN, ±Inf) records its loss and nothing else.
  void set_loss(double loss);
  void set_epoch(int64_t epoch);
  // The job's updates so far and in all (a PS's version, or the optimizer steps of the job).
  void set_job_position(int64_t step, int64_t total_steps);
  void set_test_accuracy(double accuracy);
  void record_checkpoint(double seconds);
  void record_checkpoint_read_error();
  // The run's store as this process sees it: the newest checkpoint step it saved (nullopt: none
  // yet), since when the store has not answered (Unix seconds; nullopt: it answers), and its
  // requests tried again so far.
  void set_checkpoint_store(std::optional<int64_t> saved_step,
                            std::optional<double> unreachable_since, int64_t retries);

  // Parameter-server training, trainer side: one push-and-pull round trip to all shards.
  void record_ps_exchange(double seconds, int64_t pushed_bytes, int64_t pulled_bytes);
  void record_ps_retry();
  // Server side.
  void record_ps_update(int64_t staleness);
  void record_ps_traffic(int64_t received_bytes, int64_t sent_bytes);
  void record_ps_eviction();
  // A call the PS's door refused, and why (contract/metrics.h, kPsRefusedCalls).
  void record_ps_refusal(std::string_view reason);
  // All-reduce, per step: gradient bytes all-reduced, seconds from the first bucket's all-reduce
  // to the last one done, seconds the step waited for them after backward.
  void record_allreduce(int64_t bytes, double seconds, double wait_seconds);
  // The all-reduce group this rank trains in: its size and rendezvous round.
  void set_allreduce_world(int64_t size, int64_t round);
  void set_ps_state(int64_t version, int64_t members);
  // Whether trainer `trainer` (its rank) takes part in training, and the version at which it was
  // dropped (contract/metrics.h, kPsTrainer*).
  void set_ps_trainer_training(int trainer, bool training);
  void record_ps_trainer_dropped(int trainer, int64_t version);
  // An elastic job's trainer that left: no series of it, so that nobody misses it.
  void forget_ps_trainer(int trainer);

  [[nodiscard]] prometheus::Registry& registry();

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  // kSecondsSinceProgress and the stall watchdog's word, read at scrapes.
  std::shared_ptr<prometheus::Collectable> progress_;
  prometheus::Counter* steps_;
  prometheus::Counter* images_;
  prometheus::Counter* data_wait_;
  prometheus::Counter* checkpoints_;
  prometheus::Counter* checkpoint_read_errors_;
  prometheus::Gauge* checkpoint_saved_step_;
  prometheus::Gauge* store_unreachable_since_;
  prometheus::Counter* store_retries_;
  int64_t store_retries_seen_ = 0;
  prometheus::Gauge* loss_;
  prometheus::Gauge* train_accuracy_;
  prometheus::Gauge* test_accuracy_;
  prometheus::Gauge* epoch_;
  prometheus::Gauge* job_step_;
  prometheus::Gauge* job_total_steps_;
  prometheus::Gauge* images_per_second_;
  prometheus::Histogram* step_seconds_;
  prometheus::Histogram* checkpoint_seconds_;
  prometheus::Histogram* ps_exchange_seconds_;
  prometheus::Counter* ps_pushed_bytes_;
  prometheus::Counter* ps_pulled_bytes_;
  prometheus::Counter* ps_retries_;
  prometheus::Histogram* ps_staleness_;
  prometheus::Counter* ps_updates_;
  prometheus::Counter* ps_received_bytes_;
  prometheus::Counter* ps_sent_bytes_;
  prometheus::Counter* ps_evictions_;
  prometheus::Gauge* ps_version_;
  prometheus::Gauge* ps_members_;
  prometheus::Labels labels_;  // the identity's, which the per-trainer series extend
  prometheus::Family<prometheus::Gauge>* ps_trainer_training_;
  prometheus::Family<prometheus::Gauge>* ps_trainer_dropped_at_;
  prometheus::Family<prometheus::Counter>* ps_refused_calls_;
  prometheus::Counter* allreduce_bytes_;
  prometheus::Histogram* allreduce_seconds_;
  prometheus::Histogram* allreduce_wait_seconds_;
  prometheus::Gauge* allreduce_overlap_;
  prometheus::Gauge* allreduce_world_size_;
  prometheus::Gauge* allreduce_round_;
};

}  // namespace cifar::metrics
