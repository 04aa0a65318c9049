#include "cifartrainjob/progress_scraper.h"

// cpprest's U() macro would break fmt's templates (spdlog).
#define _TURN_OFF_PLATFORM_STRING  // NOLINT(bugprone-reserved-identifier): cpprest's switch
#include <cpprest/http_client.h>
#include <spdlog/spdlog.h>

#include <map>
#include <optional>

#include "api/job.h"
#include "api/status.h"
#include "cifartrainjob/desired_state.h"
#include "cifartrainjob/progress.h"
#include "contract/metrics.h"
#include "contract/ports.h"
#include "contract/roles.h"
#include "framework/bounded_parallel.h"
#include "framework/clock.h"
#include "framework/owner.h"
#include "framework/pod_status.h"
#include "framework/sleep_until.h"

namespace cifar::op {
namespace {

using nlohmann::json;

constexpr auto kScrapeTimeout = std::chrono::seconds(2);

// http://<pod IP>:<metrics port>/metrics of a running pod of the job; "" for other pods.
std::string metrics_url(const json& pod) {
  if (!pod_role(pod)) return "";
  const auto status = pod.value("status", json::object());
  const auto ip = status.value("podIP", "");
  if (pod_phase(pod) != PodPhase::kRunning || ip.empty()) return "";
  int port = contract::kMetricsPort.number;
  for (const auto& container : pod["spec"].value("containers", json::array())) {
    for (const auto& p : container.value("ports", json::array())) {
      if (p.value("name", "") == contract::kMetricsPort.name) port = p.value("containerPort", port);
    }
  }
  const auto host = ip.find(':') != std::string::npos ? "[" + ip + "]" : ip;  // IPv6
  return "http://" + host + ":" + std::to_string(port) + "/metrics";
}

struct Target {
  std::string job_key;
  std::string pod_name;
  std::string pod_uid;
  std::string url;
  PodMetrics pod;
  std::optional<PodLiveness> heard;  // none: it did not answer
};

// The body of `url`'s answer; throws on a failure, a timeout or another status than 200.
std::string fetch(const std::string& url) {
  web::http::client::http_client_config config;
  config.set_timeout(kScrapeTimeout);
  web::http::client::http_client http(utility::conversions::to_string_t(url), config);
  const auto response = http.request(web::http::methods::GET).get();
  if (response.status_code() != web::http::status_codes::OK) {
    throw std::runtime_error("HTTP " + std::to_string(response.status_code()));
  }
  return response.extract_utf8string(true).get();
}

// What a pod that answered says of its liveness (contract/metrics.h): its steps, its heartbeat,
// its stall watchdog's limit and the stall it reported, if one lasts.
PodLiveness liveness_of(const std::string& uid, const MetricSamples& samples,
                        const std::string& exposition) {
  namespace metric = contract::metric;
  const auto value = [&](const char* name) { return sample(samples, name).value_or(0.0); };
  PodLiveness heard;
  heard.uid = uid;
  heard.steps = static_cast<int64_t>(value(metric::kSteps));
  heard.seconds_since_progress = value(metric::kSecondsSinceProgress);
  heard.stall_limit_seconds = value(metric::kStallLimitSeconds);
  if (samples.count(metric::kStallReported) > 0) {
    for (const auto& [report, series] :
         parse_samples_by_label(exposition, metric::kStallReportLabel)) {
      if (series.count(metric::kStallReported) > 0) heard.stall_report = report;
    }
  }
  heard.answered_at = Clock::now();
  return heard;
}

json without_timestamp(json progress) {
  progress.erase("updatedAt");
  return progress;
}

}  // namespace

ProgressScraper::ProgressScraper(const Informer& jobs, const Informer& pods,
                                 std::chrono::milliseconds interval, int concurrency, Sink sink,
                                 HeardSink heard)
    : jobs_(jobs),
      pods_(pods),
      interval_(interval),
      concurrency_(concurrency),
      sink_(std::move(sink)),
      heard_(std::move(heard)) {}

void ProgressScraper::run(const std::atomic<bool>& stop) {
  while (!stop.load()) {
    const auto next = Steady::now() + interval_;
    try {
      scrape_once(stop);
    } catch (const std::exception& e) {
      spdlog::warn("progress: {}", e.what());
    }
    sleep_until_or_stop(stop, next);
  }
}

void ProgressScraper::scrape_once(const std::atomic<bool>& stop) {
  std::map<std::string, json> running;      // job key -> its status
  std::map<std::string, std::string> uids;  // job key -> its UID, whose pods alone are scraped
  // Jobs whose pods may train: running, or not all created or restarted yet (an asynchronous job
  // trains with the trainers that are there).
  const auto may_train = [](const json& j) {
    const auto state = j.value("status", json::object()).value("state", "");
    for (const auto type :
         {ConditionType::kCreated, ConditionType::kRunning, ConditionType::kRestarting}) {
      if (state == condition_type_name(type)) return true;
    }
    return false;
  };
  for (const auto& job : jobs_.list(may_train)) {
    running[Informer::key_of(job)] = job["status"];
    uids[Informer::key_of(job)] = job["metadata"].value("uid", "");
  }
  if (running.empty()) return;
  // Which pods each job has, and what to scrape.
  std::map<std::string, JobPods> job_pods;
  std::vector<Target> targets;
  for (const auto& [key, status] : running) {
    auto& roles = job_pods[key];
    for (const auto& pod : pods_.indexed(key)) {
      if (!controlled_by(pod, uids[key])) continue;  // an earlier job's orphan, a user's pod
      const auto role = pod_role(pod);
      roles.has_master = roles.has_master || role == Role::kMaster;
      roles.has_evaluator = roles.has_evaluator || role == Role::kEvaluator;
      const auto index = pod_index(pod);
      if (!role || !index) continue;
      auto url = metrics_url(pod);
      if (url.empty()) continue;
      const auto& meta = pod["metadata"];
      targets.push_back(Target{key,
                               meta.value("name", ""),
                               meta.value("uid", ""),
                               std::move(url),
                               {std::string(role_name(*role)), *index, {}},
                               std::nullopt});
    }
  }
  // Each pod's answer is parsed where it was fetched: the bodies are not held all at once.
  const auto started = Steady::now();
  for_each_bounded(targets.size(), static_cast<size_t>(concurrency_), [&](size_t i) {
    auto& target = targets[i];
    if (stop.load()) return;  // a round of unanswering pods takes minutes: not a shutdown
    try {
      const auto body = fetch(target.url);
      target.pod.samples = parse_metric_samples(body);
      // PS 0's per-trainer series alone are read (job_progress's `trainers`).
      if (target.pod.role == contract::role_name(Role::kPs) && target.pod.index == 0) {
        target.pod.by_trainer = parse_samples_by_label(body, contract::metric::kTrainerLabel);
      }
      target.heard = liveness_of(target.pod_uid, target.pod.samples, body);
    } catch (const std::exception& e) {
      spdlog::debug("progress: {} {}-{}: {}", target.job_key, target.pod.role, target.pod.index,
                    e.what());
    }
  });
  if (stop.load()) return;
  const auto took = Steady::now() - started;
  if (took > interval_) {
    spdlog::info("progress: a round of {} pods took {:.1f} s, longer than the interval",
                 targets.size(), std::chrono::duration<double>(took).count());
  }
  std::map<std::string, std::vector<PodMetrics>> scraped;
  std::map<std::string, JobLiveness> heard;
  std::map<std::string, MissedPods> missed;
  for (auto& target : targets) {
    if (target.heard) {
      heard[target.job_key][target.pod_name] = std::move(*target.heard);
      scraped[target.job_key].push_back(std::move(target.pod));
    } else {
      missed[target.job_key][target.pod_name] = target.pod_uid;
    }
  }
  if (heard_) {
    // Every job scraped, also one none of whose pods answered: their misses count.
    for (const auto& job : running) {
      heard_(job.first, std::move(heard[job.first]), std::move(missed[job.first]));
    }
  }
  const auto now = format_time(Clock::now());
  for (const auto& [key, pods] : scraped) {
    const auto old = running[key].value("progress", json::object());
    const auto progress = job_progress(pods, job_pods[key], now, old);
    if (!progress) continue;
    if (without_timestamp(old) == without_timestamp(*progress)) continue;
    sink_(key, *progress);
  }
}

}  // namespace cifar::op
