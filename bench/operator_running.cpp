// One operator, many running jobs: what keeping their status current costs. Creates N jobs of a
// PS and a master (with activeDeadlineSeconds, so that every reconcile asks to look again at the
// deadline), plays the kubelet for their pods (Running, ready, pod IP 127.0.0.1), and serves one
// Prometheus endpoint on 127.0.0.1:9464, the pods' metrics port, with the runtime's metric names
// and a step that advances, so that the operator's progress scraper reads new progress for every
// job at every interval. Then, for a window, it counts what the operator does: reconciles by
// result (conflict: a status patch refused as stale, 409), status writes (the jobs' MODIFIED
// events), the work queue's depth and delayed entries, CPU seconds and peak RSS.
// bench/operator_running.sh starts the control plane and the operators around it.
//   bench-operator-running --kubeconfig K --namespace NS --operator-pid PID --operator-metrics URL
#include <prometheus/exposer.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#define _TURN_OFF_PLATFORM_STRING  // NOLINT(bugprone-reserved-identifier): cpprest's switch
#include <cpprest/http_client.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <iostream>
#include <map>
#include <sstream>
#include <thread>

#include "bench/support/cifar_jobs.h"
#include "bench/support/process_stats.h"
#include "contract/metrics.h"
#include "kube/client.h"
#include "kube/kubeconfig.h"

namespace {

using nlohmann::json;
using Steady = std::chrono::steady_clock;
namespace metric = cifar::contract::metric;

json cifar_job(const std::string& name) {
  return cifar::bench::cifar_job(name, {{"PS", {{"replicas", 1}}}, {"Master", {{"replicas", 1}}}},
                                 {{"activeDeadlineSeconds", 36000}});
}

// As a kubelet: the pod runs, ready, at 127.0.0.1.
json running_status() {
  return {{"status",
           {{"phase", "Running"},
            {"podIP", "127.0.0.1"},
            {"conditions", json::array({{{"type", "Ready"}, {"status", "True"}}})},
            {"containerStatuses", json::array({{{"name", "cifar-train"},
                                                {"image", "cifar-train:bench"},
                                                {"imageID", ""},
                                                {"ready", true},
                                                {"restartCount", 0},
                                                {"state", {{"running", json::object()}}}}})}}}};
}

// The operator's own metrics: each sample by its full series name.
std::map<std::string, double> scrape(const std::string& url) {
  web::http::client::http_client http(utility::conversions::to_string_t(url));
  const auto body = http.request(web::http::methods::GET).get().extract_utf8string(true).get();
  std::map<std::string, double> samples;
  std::istringstream lines(body);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    const auto space = line.rfind(' ');
    if (space == std::string::npos) continue;
    samples[line.substr(0, space)] = std::stod(line.substr(space + 1));
  }
  return samples;
}

double sample(const std::map<std::string, double>& samples, const std::string& name) {
  const auto found = samples.find(name);
  return found == samples.end() ? 0 : found->second;
}

}  // namespace

int run(int argc, char** argv) {
  CLI::App app("bench-operator-running: what an operator does to keep many running jobs current");
  std::string kubeconfig;
  std::string ns;
  std::string operator_metrics;
  int jobs = 100;
  int seconds = 60;
  int pid = 0;
  app.add_option("--kubeconfig", kubeconfig)->required();
  app.add_option("--namespace", ns, "An empty namespace, created if missing")->required();
  app.add_option("--jobs", jobs)->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--seconds", seconds, "The measured window")->capture_default_str();
  app.add_option("--operator-pid", pid)->required();
  app.add_option("--operator-metrics", operator_metrics, "http://127.0.0.1:PORT/metrics")
      ->required();
  CLI11_PARSE(app, argc, argv);

  // The pods' metrics endpoint, a step that advances 10 a second.
  auto registry = std::make_shared<prometheus::Registry>();
  const auto gauge = [&](const char* name) -> prometheus::Gauge& {
    return prometheus::BuildGauge().Name(name).Register(*registry).Add({});
  };
  auto& step = gauge(metric::kJobStep);
  gauge(metric::kJobTotalSteps).Set(1e7);
  auto& epoch = gauge(metric::kEpoch);
  auto& loss = gauge(metric::kLoss);
  auto& images = gauge(metric::kImagesPerSecond);
  gauge(metric::kTrainAccuracy).Set(0.5);
  prometheus::Exposer exposer("127.0.0.1:9464");
  exposer.RegisterCollectable(registry);
  std::atomic<bool> stop{false};
  std::thread ticker([&] {
    for (int tick = 0; !stop.load(); ++tick) {
      step.Set(static_cast<double>(tick));  // 10 steps a second
      const int epoch_now = 1 + tick / 600;  // a minute an epoch
      epoch.Set(epoch_now);
      loss.Set(2.0 / (1 + tick / 100.0));
      images.Set(400 + tick % 7);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });

  cifar::kube::Client client(cifar::kube::load_kubeconfig(kubeconfig), "bench");
  try {
    client.create({"", "v1", "namespaces", "", "", ""},
                  {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", ns}}}});
  } catch (const cifar::kube::ApiError& e) {
    if (e.status() != 409) throw;
  }
  const cifar::kube::ResourcePath job_path{
      "cifartrain.io", "v1alpha1", "cifartrainjobs", ns, "", ""};
  for (int i = 0; i < jobs; ++i) client.create(job_path, cifar_job("job-" + std::to_string(i)));
  const auto pods = cifar::kube::pods(ns);
  const auto wait_until = [&](const std::function<bool()>& done, const char* what) {
    const auto deadline = Steady::now() + std::chrono::minutes(5);
    while (!done()) {
      if (Steady::now() > deadline) throw std::runtime_error(std::string("timed out: ") + what);
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  };
  const size_t expected = static_cast<size_t>(jobs) * 2;
  wait_until([&] { return client.list(pods)["items"].size() == expected; }, "the pods");
  const auto created = client.list(pods);
  for (const auto& pod : created["items"]) {
    client.patch(pods.named(pod["metadata"]["name"].get<std::string>()).sub("status"),
                 running_status(), cifar::kube::PatchType::kMerge);
  }
  wait_until(
      [&] {
        const auto listed = client.list(job_path)["items"];
        return std::all_of(listed.begin(), listed.end(), [](const json& j) {
          return j.value("status", json::object()).value("state", "") == "Running";
        });
      },
      "every job Running");

  // The window: status writes from a watch, the queue sampled every second.
  const auto listed = client.list(job_path);
  std::atomic<int64_t> writes{0};
  std::atomic<bool> window_over{false};
  std::thread watcher([&] {
    auto version = listed["metadata"].value("resourceVersion", "");
    while (!window_over.load()) {
      client.watch(
          job_path, {"", "", version},
          [&](const cifar::kube::WatchEvent& event) {
            version = event.object["metadata"].value("resourceVersion", version);
            if (event.type == "MODIFIED") ++writes;
            return !window_over.load();
          },
          window_over, std::chrono::seconds(5));
    }
  });
  const auto before = scrape(operator_metrics);
  const double cpu_before = cifar::bench::cpu_seconds(pid);
  double max_depth = 0;
  double max_delayed = 0;
  bool has_delayed = false;
  for (int s = 0; s < seconds; ++s) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    const auto now = scrape(operator_metrics);
    max_depth = std::max(max_depth, sample(now, "cifar_operator_workqueue_depth"));
    has_delayed = has_delayed || now.count("cifar_operator_workqueue_delayed") > 0;
    max_delayed = std::max(max_delayed, sample(now, "cifar_operator_workqueue_delayed"));
  }
  const auto after = scrape(operator_metrics);
  const double cpu = cifar::bench::cpu_seconds(pid) - cpu_before;
  window_over = true;
  watcher.join();
  stop = true;
  ticker.join();
  const auto delta = [&](const std::string& result) {
    const auto name = "cifar_operator_reconciles_total{result=\"" + result + "\"}";
    return sample(after, name) - sample(before, name);
  };
  const double minutes = seconds / 60.0;
  std::cout << "jobs=" << jobs << " seconds=" << seconds << " reconciles_per_min="
            << (delta("success") + delta("requeue") + delta("conflict") + delta("error")) / minutes
            << " conflicts_per_min=" << delta("conflict") / minutes
            << " errors_per_min=" << delta("error") / minutes
            << " status_writes_per_min=" << static_cast<double>(writes.load()) / minutes
            << " max_queue_depth=" << max_depth << " max_delayed="
            << (has_delayed ? std::to_string(static_cast<int>(max_delayed)) : "-")
            << " cpu_s=" << cpu << " peak_rss_mib=" << cifar::bench::peak_rss_mib(pid) << "\n";
  return 0;
}

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "bench-operator-running: " << e.what() << "\n";
    return 1;
  }
}
