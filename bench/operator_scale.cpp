// One operator, many jobs: submits N jobs of 1 PS, 1 master, W workers (4 by default) and 1
// evaluator (as CifarTrainJobs, or as Kubeflow TFJobs of the same shape) into an empty namespace,
// watches the pods appear, and reports the time from the first submission to the last pod
// created (and, with --until running, to the last pod Running: on a cluster with nodes), and the
// operator's CPU seconds (from the first submission until it goes idle) and peak RSS from /proc.
// bench/operator_scale.sh starts the control plane and the operators around it;
// bench/operator_fleet.sh runs it on the simulated fleet (deploy/sim-cluster), where
// --run-seconds makes each job's chief succeed that long after it started.
//   bench-operator-scale --kubeconfig K --namespace NS --kind cifar|tfjob --operator-pid PID
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <fstream>
#include <iostream>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "bench/support/cifar_jobs.h"
#include "bench/support/process_stats.h"
#include "kube/client.h"
#include "kube/kubeconfig.h"

namespace {

using cifar::bench::cpu_seconds;
using cifar::bench::peak_rss_mib;
using nlohmann::json;
using Steady = std::chrono::steady_clock;

// The shape of every job: 1 PS, 1 master, `workers` workers with `worker_gpus` GPUs each, 1
// evaluator; on the simulated fleet, a chief (the master) that kwok ends after `run_seconds` (0:
// it never ends) and an evaluator 5 s later (the real one exits once it has evaluated the chief's
// final checkpoint, which the job waits for).
struct JobShape {
  int workers = 4;
  int worker_gpus = 0;
  int run_seconds = 0;
  std::string queue;  // a Kueue LocalQueue (runPolicy.schedulingPolicy.queue); "": none
  [[nodiscard]] size_t pods() const { return static_cast<size_t>(workers) + 3; }
};

// deploy/sim-cluster/stages.yaml reads it on a replica of index 0.
json run_annotations(const JobShape& shape, int after_chief = 0) {
  if (shape.run_seconds == 0) return json::object();
  return {{"sim.cifartrain.io/run-seconds", std::to_string(shape.run_seconds + after_chief)}};
}

json with_annotations(json replica, const json& annotations) {
  if (!annotations.empty()) replica["template"] = {{"metadata", {{"annotations", annotations}}}};
  return replica;
}

json gpu_limits(const JobShape& shape) {
  return {{"limits", {{"nvidia.com/gpu", shape.worker_gpus}}}};
}

json cifar_job(const std::string& name, const JobShape& shape) {
  json worker = {{"replicas", shape.workers}};
  if (shape.worker_gpus > 0) worker["resources"] = gpu_limits(shape);
  return cifar::bench::cifar_job(
      name,
      {{"PS", {{"replicas", 1}}},
       {"Master", with_annotations({{"replicas", 1}}, run_annotations(shape))},
       {"Worker", worker},
       {"Evaluator", with_annotations({{"replicas", 1}}, run_annotations(shape, 5))}},
      shape.queue.empty() ? json::object() : json{{"schedulingPolicy", {{"queue", shape.queue}}}});
}

json tf_replica(int replicas, const json& annotations = json::object(),
                const json& resources = json::object()) {
  json container = {{"name", "tensorflow"},
                    {"image", "cifar-train:bench"},
                    {"args", json::array({"-m", "resnet20"})}};
  if (!resources.empty()) container["resources"] = resources;
  json tmpl = {{"spec", {{"containers", json::array({container})}}}};
  if (!annotations.empty()) tmpl["metadata"] = {{"annotations", annotations}};
  return {{"replicas", replicas}, {"restartPolicy", "OnFailure"}, {"template", tmpl}};
}

json tf_job(const std::string& name, const JobShape& shape) {
  return {{"apiVersion", "kubeflow.org/v1"},
          {"kind", "TFJob"},
          {"metadata", {{"name", name}}},
          {"spec",
           {{"tfReplicaSpecs",
             {{"PS", tf_replica(1)},
              {"Master", tf_replica(1, run_annotations(shape))},
              {"Worker", tf_replica(shape.workers, json::object(),
                                    shape.worker_gpus > 0 ? gpu_limits(shape) : json::object())},
              {"Evaluator", tf_replica(1, run_annotations(shape, 5))}}}}}};
}

}  // namespace

int run(int argc, char** argv) {
  CLI::App app("bench-operator-scale: time for an operator to create the pods of many jobs");
  std::string kubeconfig;
  std::string ns;
  std::string kind = "cifar";
  int jobs = 100;
  int submitters = 4;
  int pid = 0;
  bool submit_only = false;
  JobShape shape;
  std::string until = "created";
  int timeout_minutes = 10;
  app.add_option("--kubeconfig", kubeconfig)->required();
  app.add_option("--namespace", ns, "An empty namespace, created if missing")->required();
  app.add_option("--kind", kind)->check(CLI::IsMember({"cifar", "tfjob"}))->capture_default_str();
  app.add_option("--jobs", jobs)->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--submitters", submitters, "Threads creating the jobs")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  auto* pid_option =
      app.add_option("--operator-pid", pid, "The operator's process, for CPU and RSS");
  app.add_flag("--submit-only", submit_only, "Only create the jobs (a warm-up), measure nothing");
  app.add_option("--workers", shape.workers, "Workers a job")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--worker-gpus", shape.worker_gpus, "nvidia.com/gpu a worker")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--run-seconds", shape.run_seconds,
                 "The chief's annotation sim.cifartrain.io/run-seconds (0: none)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--queue", shape.queue, "Kueue LocalQueue of every job (cifar only)");
  app.add_option("--until", until, "Until every pod is created, or Running (a cluster with nodes)")
      ->check(CLI::IsMember({"created", "running"}))
      ->capture_default_str();
  app.add_option("--timeout-minutes", timeout_minutes)
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (!shape.queue.empty() && kind != "cifar") {
    std::cerr << "bench-operator-scale: --queue is for --kind cifar\n";
    return 2;
  }
  if (!submit_only && pid_option->count() == 0) {
    std::cerr << "bench-operator-scale: --operator-pid is required\n";
    return 2;
  }

  try {
    cifar::kube::Client client(cifar::kube::load_kubeconfig(kubeconfig), "bench");
    try {
      client.create({"", "v1", "namespaces", "", "", ""},
                    {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", ns}}}});
    } catch (const cifar::kube::ApiError& e) {
      if (e.status() != 409) throw;
    }
    const auto pods = cifar::kube::pods(ns);
    const auto listed = client.list(pods);
    if (!listed["items"].empty()) throw std::runtime_error("namespace " + ns + " has pods already");

    // Every pod as it is created (and as it runs), from a watch that starts before the first
    // submission.
    const size_t expected = static_cast<size_t>(jobs) * shape.pods();
    const bool wait_running = until == "running";
    std::mutex mu;
    std::set<std::string> seen;
    std::set<std::string> running;
    Steady::time_point all_created{};
    Steady::time_point all_running{};
    std::atomic<bool> done{false};
    std::thread watcher([&] {
      auto version = listed["metadata"].value("resourceVersion", "");
      while (!done.load()) {
        client.watch(
            pods, {"", "", version},
            [&](const cifar::kube::WatchEvent& event) {
              version = event.object["metadata"].value("resourceVersion", version);
              if (event.type != "ADDED" && event.type != "MODIFIED") return true;  // bookmarks
              const auto name = event.object["metadata"]["name"].get<std::string>();
              const std::lock_guard lock(mu);
              if (seen.insert(name).second && seen.size() == expected) {
                all_created = Steady::now();
                if (!wait_running) done = true;
              }
              const auto phase = event.object.value("status", json::object()).value("phase", "");
              if (wait_running && phase == "Running" && running.insert(name).second &&
                  running.size() == expected) {
                all_running = Steady::now();
                done = true;
              }
              return !done.load();
            },
            done, std::chrono::seconds(60));
      }
    });

    const double cpu_before = submit_only ? 0 : cpu_seconds(pid);
    const auto start = Steady::now();
    std::atomic<int> next{0};
    std::vector<std::thread> threads;
    threads.reserve(static_cast<size_t>(submitters));
    const auto path =
        kind == "cifar"
            ? cifar::kube::ResourcePath{"cifartrain.io", "v1alpha1", "cifartrainjobs", ns, "", ""}
            : cifar::kube::ResourcePath{"kubeflow.org", "v1", "tfjobs", ns, "", ""};
    for (int t = 0; t < submitters; ++t) {
      threads.emplace_back([&] {
        for (int i = next++; i < jobs; i = next++) {
          const auto name = "job-" + std::to_string(i);
          client.create(path, kind == "cifar" ? cifar_job(name, shape) : tf_job(name, shape));
        }
      });
    }
    for (auto& t : threads) t.join();
    const auto submitted = Steady::now();
    if (submit_only) {
      done = true;
      watcher.join();
      return 0;
    }

    const auto deadline = start + std::chrono::minutes(timeout_minutes);
    while (!done.load() && Steady::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (!done.load()) {
      done = true;
      watcher.join();
      throw std::runtime_error("only " + std::to_string(seen.size()) + " of " +
                               std::to_string(expected) + " pods created and " +
                               std::to_string(running.size()) + " running after " +
                               std::to_string(timeout_minutes) + " minutes");
    }
    watcher.join();
    // CPU until the operator is idle: its status writes and services come after the pods.
    double cpu = cpu_seconds(pid);
    for (int i = 0; i < 120; ++i) {
      std::this_thread::sleep_for(std::chrono::seconds(1));
      const double now = cpu_seconds(pid);
      const bool idle = now - cpu < 0.02;
      cpu = now;
      if (idle) break;
    }
    const auto seconds = [&](Steady::time_point t) {
      return std::chrono::duration<double>(t - start).count();
    };
    std::cout << kind << " jobs=" << jobs << " pods=" << expected
              << " submit_s=" << seconds(submitted) << " all_pods_s=" << seconds(all_created);
    if (wait_running) std::cout << " all_running_s=" << seconds(all_running);
    std::cout << " cpu_s=" << cpu - cpu_before << " peak_rss_mib=" << peak_rss_mib(pid) << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "bench-operator-scale: " << e.what() << "\n";
    return 1;
  }
}

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "bench-operator-scale: " << e.what() << "\n";
    return 1;
  }
}
