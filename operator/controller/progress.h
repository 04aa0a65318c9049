// status.progress of a running job, from its pods' Prometheus endpoints (the runtime's cifar_*
// metrics, DESIGN.md), so that pods need no API rights to report it. Pure: the scraping itself is
// in progress_scraper.h.
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

// The scrape of one pod.
struct PodMetrics {
  std::string role;  // "master", "worker", "evaluator" (the replica-type label)
  int index = 0;
  MetricSamples samples;
};

// status.progress: epoch, step, loss and train accuracy from the chief (the master, else worker
// 0), images/s summed over every trainer (master and workers), test accuracy from the evaluator
// when there is one, else from the chief. nullopt when the chief was not scraped. A test accuracy
// of 0 means "not evaluated yet" to the runtime and is left out.
std::optional<nlohmann::json> job_progress(const std::vector<PodMetrics>& pods,
                                           const std::string& now);

}  // namespace cifar::op
