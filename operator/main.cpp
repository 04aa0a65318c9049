// cifar-operator: reconciles CifarTrainJobs into pods and a Service (cifartrainjob/), against the
// API server of the kubeconfig or, in a pod, of its service account.
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <cmath>
#include <csignal>
#include <thread>
#include <vector>

#ifdef __GLIBC__
#include <malloc.h>  // mallopt
#endif

#include "cifartrainjob/controller.h"
#include "cifartrainjob/operator_metrics.h"
#include "framework/health_server.h"
#include "framework/http_probe.h"
#include "framework/leader_election.h"
#include "kube/client.h"
#include "kube/kubeconfig.h"

namespace {

// SIGTERM/SIGINT, waited for by a thread (nothing async-signal-unsafe in a handler).
void stop_on_signals(std::atomic<bool>& stop) {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);  // before any other thread starts
  std::thread([signals, &stop] {
    int received = 0;
    sigwait(&signals, &received);
    spdlog::info("signal {}: finishing the reconciles in progress, then exiting", received);
    stop = true;
  }).detach();
}

int probe(const std::vector<std::string>& urls) {
  int failed = 0;
  for (const auto& url : urls) {
    const auto result = cifar::op::probe_http(url, std::chrono::seconds(10));
    spdlog::log(result.ok ? spdlog::level::info : spdlog::level::err, "probe {}: {}", url,
                result.detail);
    failed += result.ok ? 0 : 1;
  }
  return failed == 0 ? 0 : 1;
}

int run(int argc, char** argv) {
  CLI::App app("cifar-operator: runs CifarTrainJobs on Kubernetes");
  std::string kubeconfig;
  cifar::op::ControllerOptions options;
  int metrics_port = 8080;
  int health_port = 8081;
  bool leader_elect = true;
  cifar::op::ElectionConfig election;
  double lease_duration_s = 15;
  double renew_deadline_s = 10;
  double retry_period_s = 2;
  app.add_option("--kubeconfig", kubeconfig,
                 "kubeconfig file (default: $KUBECONFIG, in-cluster config, ~/.kube/config)");
  app.add_option("--namespace", options.namespace_, "Watch one namespace (default: all)");
  app.add_option("--workers", options.workers, "Jobs reconciled at once")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  double progress_interval_s = 15;
  app.add_option("--progress-interval", progress_interval_s,
                 "Seconds between reads of status.progress from running jobs' metrics endpoints "
                 "(0: off)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--progress-concurrency", options.progress_concurrency,
                 "Pods' metrics endpoints read at once in a progress round (each read waits up "
                 "to 2 s for an answer)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--metrics-port", metrics_port, "Prometheus metrics (0: off)")
      ->capture_default_str();
  app.add_option("--health-port", health_port, "/healthz and /readyz (0: off)")
      ->capture_default_str();
  app.add_flag("--leader-elect,!--no-leader-elect", leader_elect,
               "Hold a coordination.k8s.io Lease while reconciling, so that of several replicas "
               "exactly one acts")
      ->capture_default_str();
  app.add_option("--leader-elect-namespace", election.namespace_,
                 "Namespace of the Lease (default: --namespace, else the context's or pod's)");
  app.add_option("--leader-elect-name", election.name, "Name of the Lease")->capture_default_str();
  app.add_option("--leader-elect-lease-duration", lease_duration_s,
                 "Seconds a standby waits after the last renewal it saw before taking over")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--leader-elect-renew-deadline", renew_deadline_s,
                 "Seconds the leader keeps trying to renew before it stops reconciling")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--leader-elect-retry-period", retry_period_s,
                 "Seconds between attempts to acquire or renew")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  std::vector<std::string> probe_urls;
  app.add_option("--probe", probe_urls,
                 "GET each URL and exit 0 if all answer 2xx (the chart's `helm test`); "
                 "nothing else runs")
      ->expected(1, -1);
  CLI11_PARSE(app, argc, argv);
  if (!probe_urls.empty()) return probe(probe_urls);
  if (renew_deadline_s >= lease_duration_s) {
    // Otherwise a leader cut off from the API server could still act after a standby took over.
    spdlog::error(
        "--leader-elect-renew-deadline ({}) must be less than "
        "--leader-elect-lease-duration ({})",
        renew_deadline_s, lease_duration_s);
    return 2;
  }
  const auto millis = [](double s) { return std::chrono::milliseconds(std::lround(s * 1000)); };
  election.lease_duration = millis(lease_duration_s);
  election.renew_deadline = millis(renew_deadline_s);
  election.retry_period = millis(retry_period_s);
  options.progress_interval = millis(progress_interval_s);
  spdlog::set_pattern("[%H:%M:%S.%e] [%l] %v");

  std::atomic<bool> stop{false};
  stop_on_signals(stop);
  try {
    cifar::kube::Client client(cifar::kube::load_cluster_access(kubeconfig));
    spdlog::info("cifar-operator: API server {}, namespace {}", client.access().server,
                 options.namespace_.empty() ? "(all)" : options.namespace_);
    cifar::op::OperatorMetrics metrics(metrics_port > 0 ? "0.0.0.0:" + std::to_string(metrics_port)
                                                        : "");
    cifar::op::JobController controller(client, options, metrics);
    // Ready: leading with synced caches, or standing by (a standby that never became ready would
    // stall a rolling update of the operator's Deployment).
    enum class Role { kStarting, kStandby, kLeader };
    std::atomic<Role> role{leader_elect ? Role::kStarting : Role::kLeader};
    std::unique_ptr<cifar::op::HealthServer> health;
    if (health_port > 0) {
      health = std::make_unique<cifar::op::HealthServer>(
          "http://0.0.0.0:" + std::to_string(health_port), [&] {
            const auto r = role.load();
            return r == Role::kStandby || (r == Role::kLeader && controller.ready());
          });
    }
    if (!leader_elect) {
      metrics.set_leader(true);
      controller.run(stop);
      spdlog::info("cifar-operator: stopped");
      return 0;
    }
    if (election.namespace_.empty()) {
      election.namespace_ =
          options.namespace_.empty() ? client.access().namespace_ : options.namespace_;
    }
    election.identity = cifar::op::default_identity();
    // Its own client, whose requests time out early enough for two tries of a read and a
    // write to fit in the renew deadline.
    cifar::kube::Client election_client(client.access(), "cifar-operator",
                                        election.renew_deadline / 4);
    cifar::op::LeaderElector elector(election_client, election);
    const auto outcome = elector.run(
        stop, [&](const std::atomic<bool>& stop_leading) { controller.run(stop_leading); },
        [&](bool leading) {
          metrics.set_leader(leading);
          if (leading) {
            role = Role::kLeader;
          } else if (role.load() == Role::kStarting) {
            role = Role::kStandby;
          }
        });
    if (outcome == cifar::op::LeaderElector::Outcome::kLostLease) {
      // The caches and queue of a former leader are not reused: exit, and let the Deployment
      // restart a fresh standby.
      spdlog::error("cifar-operator: lost leadership, exiting");
      return 1;
    }
    spdlog::info("cifar-operator: stopped");
    return 0;
  } catch (const std::exception& e) {
    spdlog::error("cifar-operator: {}", e.what());
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
#ifdef __GLIBC__
  // Two malloc arenas, not glibc's eight a core: the informers' threads each filled an arena of
  // their own with what a list left freed (a 102 MB heap held 240 MB resident at 9,000 pods, 190
  // MB with two: docs/BENCHMARKS.md, section 21). The operator's threads seldom allocate at once.
  mallopt(M_ARENA_MAX, 2);
#endif
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    spdlog::error("cifar-operator: {}", e.what());
    return 1;
  }
}
