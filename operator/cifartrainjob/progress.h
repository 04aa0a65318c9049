// status.progress of a running job, from its pods' Prometheus endpoints (the runtime's cifar_*
// metrics, contract/metrics.h), so that pods need no API rights to report it. Pure: the scraping
// itself is in progress_scraper.h.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace cifar::op {

// The first sample of each metric in a Prometheus text exposition, by metric name (the runtime
// serves one series per metric: its own job/role/index labels). Comments, histograms' _bucket
// series and unparsable lines are skipped.
using MetricSamples = std::map<std::string, double>;
MetricSamples parse_metric_samples(const std::string& exposition);
// The sample of metric `name`, nullopt if the exposition had none.
std::optional<double> sample(const MetricSamples& samples, const std::string& name);
// The samples of the series that carry `label`, by its value, then by metric name (a PS's
// per-trainer series: label "trainer").
std::map<std::string, MetricSamples> parse_samples_by_label(const std::string& exposition,
                                                            const std::string& label);

// The scrape of one pod.
struct PodMetrics {
  std::string role;  // "ps", "master", "worker", "evaluator" (the replica-type label)
  int index = 0;
  MetricSamples samples;
  std::map<std::string, MetricSamples> by_trainer{};  // a PS's per-trainer series, by rank
};

// Which pods a job has, from the cache (not from which scrapes succeeded): the chief is the
// master, else worker 0.
struct JobPods {
  bool has_master = false;
  bool has_evaluator = false;
};

// status.progress: epoch, the job's step, loss and train accuracy from the chief, images/s summed
// over every trainer scraped (master and workers), test accuracy from the evaluator when the job
// has one, else from the chief. nullopt when the chief was not scraped (no figures from a
// stand-in). A test accuracy of 0 means "not evaluated yet" to the runtime and is left out.
// progressPercentage and estimatedRemainingSeconds (the names of Kubeflow Trainer's KEP-2779)
// come from the job's step and total, the estimate from the rate since `previous` (the
// status.progress written last, at its updatedAt); each is absent until known. A parameter-server
// job's `trainers` come from PS 0's per-trainer series (contract/metrics.h): {expected, training,
// missing: [{trainer, droppedAtStep if it was dropped}]}; the previous ones stand while PS 0 was
// not scraped. An all-reduce job's `world` is its group training now: the workers that report the
// newest rendezvous round (cifar_allreduce_round), {round, size, workers: [their indices]}; the
// previous one stands while none reports one (between rounds) or not all of its ranks answered. A
// parameter-server job's is the workers PS 0 says train, {size, workers, trainers: with the
// master}. An
// elastic job whose worker 0 was not scraped takes the first worker of the world for its chief.
// `checkpoint` is the chief's: {savedStep, storeUnreachableSince while its store does not answer}.
std::optional<nlohmann::json> job_progress(
    const std::vector<PodMetrics>& scraped, const JobPods& job, const std::string& now,
    const nlohmann::json& previous = nlohmann::json::object());

// status.progress of a job that ended, when its pods no longer serve metrics: the last reading
// (`last`, null for none) without its estimate of the time to go, updated with the final figures
// the chief and the evaluator left in their termination messages (contract/termination.h; a
// message that is not such an object, e.g. the end of a log, adds nothing): the chief's epoch,
// step, loss and accuracies, the evaluator's test accuracy over the chief's. A job that
// succeeded is 100% done, its checkpoint the chief's last saved and its store answering (the last
// checkpoint is in it); one that failed stays where it stopped.
nlohmann::json final_progress(nlohmann::json last, const std::string& chief_message,
                              const std::string& evaluator_message, bool succeeded,
                              const std::string& now);

}  // namespace cifar::op
