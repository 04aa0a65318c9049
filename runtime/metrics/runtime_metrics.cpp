#include "metrics/runtime_metrics.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "contract/metrics.h"
#include "health/heartbeat.h"
#include "health/watchdog.h"

namespace cifar::metrics {
namespace {

namespace metric = contract::metric;

prometheus::Labels labels_of(const Identity& id) {
  return {
      {metric::kJobLabel, id.job}, {metric::kRoleLabel, id.role}, {metric::kIndexLabel, id.index}};
}

// Step times span ~1 ms (small nets on GPU) to tens of seconds (big nets on 2 CPU cores).
prometheus::Histogram::BucketBoundaries step_buckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
}

// Opens and closes a connection to `port` on this machine's loopback (refused where the endpoint
// listens on another address only). Non-blocking: a full backlog drops it instead of holding it.
void knock(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  static_cast<void>(::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address));
  ::close(fd);
}

// Read at each scrape (health/heartbeat.h, health/watchdog.h), so that the seconds since progress
// grow while the process is stuck, when nothing of it runs to set a gauge.
class ProgressHealth : public prometheus::Collectable {
 public:
  explicit ProgressHealth(const prometheus::Labels& labels) {
    for (const auto& [name, value] : labels) labels_.push_back({name, value});
  }
  [[nodiscard]] std::vector<prometheus::MetricFamily> Collect() const override {
    std::vector<prometheus::MetricFamily> families;
    families.push_back(gauge(metric::kSecondsSinceProgress,
                             "Seconds since this process last made progress (a trainer's step, a "
                             "parameter server's update, an evaluator's checkpoint); 0 while it "
                             "waits by design.",
                             health::progress_state().seconds_since_progress, labels_));
    const auto stall = health::stall_status();
    if (stall.limit_seconds > 0) {
      families.push_back(gauge(metric::kStallLimitSeconds,
                               "A trainer's stall limit: no progress for longer is a stall "
                               "(--stall-seconds, else derived from its pace).",
                               stall.limit_seconds, labels_));
    }
    if (!stall.summary.empty()) {
      auto labels = labels_;
      labels.push_back({metric::kStallReportLabel, stall.summary});
      families.push_back(gauge(metric::kStallReported,
                               "1 while the stall this trainer reported lasts; its report's "
                               "summary in the label.",
                               1, labels));
    }
    return families;
  }

 private:
  static prometheus::MetricFamily gauge(const char* name, const char* help, double value,
                                        std::vector<prometheus::ClientMetric::Label> labels) {
    prometheus::ClientMetric sample;
    sample.label = std::move(labels);
    sample.gauge.value = value;
    return {name, help, prometheus::MetricType::Gauge, {sample}};
  }

  std::vector<prometheus::ClientMetric::Label> labels_;
};

}  // namespace

RuntimeMetrics::RuntimeMetrics(const Identity& identity, const std::string& bind_address)
    : registry_(std::make_shared<prometheus::Registry>()) {
  const auto labels = labels_of(identity);
  auto& r = *registry_;
  auto counter = [&](const char* name, const char* help) {
    return &prometheus::BuildCounter().Name(name).Help(help).Register(r).Add(labels);
  };
  auto gauge = [&](const char* name, const char* help) {
    return &prometheus::BuildGauge().Name(name).Help(help).Register(r).Add(labels);
  };
  auto histogram = [&](const char* name, const char* help,
                       const prometheus::Histogram::BucketBoundaries& buckets = step_buckets()) {
    return &prometheus::BuildHistogram().Name(name).Help(help).Register(r).Add(labels, buckets);
  };
  steps_ = counter(metric::kSteps, "Training steps (optimizer updates) completed.");
  images_ = counter(metric::kImages, "Training images processed.");
  data_wait_ = counter(metric::kDataWaitSeconds,
                       "Time the training loop spent waiting for the data loader.");
  checkpoints_ = counter(metric::kCheckpoints, "Checkpoints written.");
  checkpoint_read_errors_ =
      counter(metric::kCheckpointReadErrors, "Checkpoints found that could not be read.");
  checkpoint_saved_step_ =
      gauge(metric::kCheckpointSavedStep,
            "Step of the newest checkpoint written to the store; -1: none yet.");
  checkpoint_saved_step_->Set(-1);
  store_unreachable_since_ =
      gauge(metric::kStoreUnreachableSince,
            "Unix time since which the run's store has not answered; 0 while it answers.");
  store_retries_ = counter(metric::kStoreRetries,
                           "Requests to the run's store that failed transiently and were retried.");
  loss_ = gauge(metric::kLoss, "Training loss of the latest step.");
  train_accuracy_ = gauge(metric::kTrainAccuracy, "Training accuracy of the current epoch so far.");
  test_accuracy_ = gauge(metric::kTestAccuracy, "Test-set accuracy of the latest evaluation.");
  epoch_ = gauge(metric::kEpoch, "Current epoch (1-based).");
  job_step_ = gauge(metric::kJobStep,
                    "The job's updates so far (a PS's version counts every "
                    "trainer's).");
  job_total_steps_ = gauge(metric::kJobTotalSteps, "The job's updates in all.");
  images_per_second_ = gauge(metric::kImagesPerSecond, "Training throughput, images per second.");
  step_seconds_ = histogram(metric::kStepSeconds, "Wall time of one training step.");
  checkpoint_seconds_ =
      histogram(metric::kCheckpointSeconds,
                "Time the training loop spent taking one checkpoint (written in the background).");
  ps_exchange_seconds_ =
      histogram(metric::kPsPushPullSeconds,
                "Trainer: one push of gradients and pull of parameters to and from all PS shards.",
                {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10, 30});
  ps_pushed_bytes_ = counter(metric::kPsPushBytes, "Trainer: gradient bytes pushed.");
  ps_pulled_bytes_ = counter(metric::kPsPullBytes, "Trainer: parameter bytes pulled.");
  ps_retries_ =
      counter(metric::kPsRetries, "Trainer: calls to a PS shard retried (unreachable, restarted).");
  ps_staleness_ =
      histogram(metric::kPsStaleness,
                "PS: updates applied between a gradient's parameters and its own application.",
                {0, 1, 2, 3, 4, 6, 8, 12, 16, 32, 64});
  ps_updates_ = counter(metric::kPsUpdates, "PS: updates applied to this shard.");
  ps_received_bytes_ = counter(metric::kPsReceivedBytes, "PS: gradient bytes received.");
  ps_sent_bytes_ = counter(metric::kPsSentBytes, "PS: parameter bytes sent.");
  ps_evictions_ = counter(metric::kPsEvictions,
                          "PS: trainers dropped from a round after --ps-timeout of silence.");
  ps_version_ = gauge(metric::kPsVersion, "PS: updates applied to this shard since the start.");
  ps_members_ = gauge(metric::kPsMembers, "PS: trainers taking part in training.");
  labels_ = labels;
  ps_trainer_training_ = &prometheus::BuildGauge()
                              .Name(metric::kPsTrainerTraining)
                              .Help("PS: 1 while the trainer (its rank) takes part in training.")
                              .Register(r);
  ps_trainer_dropped_at_ =
      &prometheus::BuildGauge()
           .Name(metric::kPsTrainerDroppedAtStep)
           .Help("PS: the version (the job's step) at which the trainer was last dropped.")
           .Register(r);
  ps_refused_calls_ = &prometheus::BuildCounter()
                           .Name(metric::kPsRefusedCalls)
                           .Help("PS: calls refused at its door (TLS certificate, job token).")
                           .Register(r);
  allreduce_bytes_ = counter(metric::kAllReduceBytes, "All-reduce: gradient bytes reduced.");
  allreduce_seconds_ = histogram(
      metric::kAllReduceSeconds,
      "All-reduce: one step's gradient all-reduce, first bucket started to last bucket done.");
  allreduce_wait_seconds_ =
      histogram(metric::kAllReduceWaitSeconds,
                "All-reduce: time a step waited for its all-reduce after backward finished.");
  allreduce_overlap_ = gauge(metric::kAllReduceOverlap,
                             "All-reduce: share of the latest step's all-reduce hidden behind "
                             "backward (1 - wait / all-reduce time).");
  allreduce_world_size_ =
      gauge(metric::kAllReduceWorldSize, "All-reduce: the ranks of the group this rank trains in.");
  allreduce_round_ = gauge(metric::kAllReduceRound,
                           "All-reduce: the rendezvous round of the group this rank trains in.");

  if (!bind_address.empty()) {
    try {
      exposer_ = std::make_unique<prometheus::Exposer>(bind_address);
    } catch (const std::exception& e) {
      throw std::runtime_error("cannot serve metrics on " + bind_address + " (" + e.what() +
                               "); is the port in use? --metrics-port -1 turns the endpoint off");
    }
    exposer_->RegisterCollectable(registry_);
    progress_ = std::make_shared<ProgressHealth>(labels);
    exposer_->RegisterCollectable(progress_);
  }
}

// civetweb's listening thread, which the Exposer's destructor joins, sees that it is to stop only
// between two polls of its socket, 2 s apart: connections to the port wake it, so that the
// endpoint closes in milliseconds, not seconds, when a run ends (a graceful stop among them).
RuntimeMetrics::~RuntimeMetrics() {
  const auto listening = port();
  if (listening == 0) return;
  std::atomic<bool> closed{false};
  std::thread waker;
  try {
    waker = std::thread([&] {
      while (!closed.load()) {
        knock(listening);
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    });
  } catch (const std::system_error&) {  // no thread to spare: it closes at civetweb's pace
  }
  exposer_.reset();
  closed.store(true);
  if (waker.joinable()) waker.join();
}

uint16_t RuntimeMetrics::port() const {
  if (!exposer_) return 0;
  const auto ports = exposer_->GetListeningPorts();
  return ports.empty() ? 0 : static_cast<uint16_t>(ports.front());
}

void RuntimeMetrics::record_step(const Step& step) {
  steps_->Increment();
  images_->Increment(static_cast<double>(step.images));
  data_wait_->Increment(step.data_wait_seconds);
  set_loss(step.loss);
  train_accuracy_->Set(step.accuracy);
  images_per_second_->Set(step.images_per_second);
  step_seconds_->Observe(step.seconds);
}

void RuntimeMetrics::set_loss(double loss) { loss_->Set(loss); }

void RuntimeMetrics::set_epoch(int64_t epoch) { epoch_->Set(static_cast<double>(epoch)); }

void RuntimeMetrics::set_job_position(int64_t step, int64_t total_steps) {
  job_step_->Set(static_cast<double>(step));
  job_total_steps_->Set(static_cast<double>(total_steps));
}

void RuntimeMetrics::set_test_accuracy(double accuracy) { test_accuracy_->Set(accuracy); }

void RuntimeMetrics::record_checkpoint_read_error() { checkpoint_read_errors_->Increment(); }

void RuntimeMetrics::set_checkpoint_store(std::optional<int64_t> saved_step,
                                          std::optional<double> unreachable_since,
                                          int64_t retries) {
  if (saved_step) checkpoint_saved_step_->Set(static_cast<double>(*saved_step));
  store_unreachable_since_->Set(unreachable_since.value_or(0));
  if (retries > store_retries_seen_) {
    store_retries_->Increment(static_cast<double>(retries - store_retries_seen_));
    store_retries_seen_ = retries;
  }
}

void RuntimeMetrics::record_checkpoint(double seconds) {
  checkpoints_->Increment();
  checkpoint_seconds_->Observe(seconds);
}

void RuntimeMetrics::record_ps_exchange(double seconds, int64_t pushed_bytes,
                                        int64_t pulled_bytes) {
  ps_exchange_seconds_->Observe(seconds);
  ps_pushed_bytes_->Increment(static_cast<double>(pushed_bytes));
  ps_pulled_bytes_->Increment(static_cast<double>(pulled_bytes));
}

void RuntimeMetrics::record_allreduce(int64_t bytes, double seconds, double wait_seconds) {
  allreduce_bytes_->Increment(static_cast<double>(bytes));
  allreduce_seconds_->Observe(seconds);
  allreduce_wait_seconds_->Observe(wait_seconds);
  allreduce_overlap_->Set(seconds > 0 ? std::max(0.0, 1 - wait_seconds / seconds) : 0);
}

void RuntimeMetrics::record_ps_retry() { ps_retries_->Increment(); }

void RuntimeMetrics::record_ps_update(int64_t staleness) {
  ps_updates_->Increment();
  ps_staleness_->Observe(static_cast<double>(staleness));
}

void RuntimeMetrics::record_ps_traffic(int64_t received_bytes, int64_t sent_bytes) {
  ps_received_bytes_->Increment(static_cast<double>(received_bytes));
  ps_sent_bytes_->Increment(static_cast<double>(sent_bytes));
}

void RuntimeMetrics::record_ps_eviction() { ps_evictions_->Increment(); }

void RuntimeMetrics::set_allreduce_world(int64_t size, int64_t round) {
  allreduce_world_size_->Set(static_cast<double>(size));
  allreduce_round_->Set(static_cast<double>(round));
}

void RuntimeMetrics::set_ps_state(int64_t version, int64_t members) {
  ps_version_->Set(static_cast<double>(version));
  ps_members_->Set(static_cast<double>(members));
}

namespace {

prometheus::Gauge& trainer_series(prometheus::Family<prometheus::Gauge>& family,
                                  prometheus::Labels labels, int trainer) {
  labels[metric::kTrainerLabel] = std::to_string(trainer);
  return family.Add(labels);  // the series of these labels, made the first time
}

}  // namespace

void RuntimeMetrics::set_ps_trainer_training(int trainer, bool training) {
  trainer_series(*ps_trainer_training_, labels_, trainer).Set(training ? 1 : 0);
}

void RuntimeMetrics::record_ps_trainer_dropped(int trainer, int64_t version) {
  trainer_series(*ps_trainer_dropped_at_, labels_, trainer).Set(static_cast<double>(version));
}

void RuntimeMetrics::forget_ps_trainer(int trainer) {
  for (auto* family : {ps_trainer_training_, ps_trainer_dropped_at_}) {
    auto labels = labels_;
    labels[metric::kTrainerLabel] = std::to_string(trainer);
    if (family->Has(labels)) family->Remove(&family->Add(labels));
  }
}

void RuntimeMetrics::record_ps_refusal(std::string_view reason) {
  auto labels = labels_;
  labels[metric::kRefusalLabel] = std::string(reason);
  ps_refused_calls_->Add(labels).Increment();  // the series of these labels, made the first time
}

prometheus::Registry& RuntimeMetrics::registry() { return *registry_; }

}  // namespace cifar::metrics
