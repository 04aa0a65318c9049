// cifar-operator: reconciles CifarTrainJobs into pods and a Service (controller/), against the
// API server of the kubeconfig or, in a pod, of its service account.
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <csignal>
#include <thread>

#include "controller/controller.h"
#include "controller/health_server.h"
#include "controller/operator_metrics.h"
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

int run(int argc, char** argv) {
  CLI::App app("cifar-operator: runs CifarTrainJobs on Kubernetes");
  std::string kubeconfig;
  cifar::op::ControllerOptions options;
  int metrics_port = 8080;
  int health_port = 8081;
  app.add_option("--kubeconfig", kubeconfig,
                 "kubeconfig file (default: $KUBECONFIG, in-cluster config, ~/.kube/config)");
  app.add_option("--namespace", options.namespace_, "Watch one namespace (default: all)");
  app.add_option("--workers", options.workers, "Jobs reconciled at once")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--metrics-port", metrics_port, "Prometheus metrics (0: off)")
      ->capture_default_str();
  app.add_option("--health-port", health_port, "/healthz and /readyz (0: off)")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
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
    std::unique_ptr<cifar::op::HealthServer> health;
    if (health_port > 0) {
      health = std::make_unique<cifar::op::HealthServer>(
          "http://0.0.0.0:" + std::to_string(health_port), [&] { return controller.ready(); });
    }
    metrics.set_leader(true);
    controller.run(stop);
    spdlog::info("cifar-operator: stopped");
    return 0;
  } catch (const std::exception& e) {
    spdlog::error("cifar-operator: {}", e.what());
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    spdlog::error("cifar-operator: {}", e.what());
    return 1;
  }
}
