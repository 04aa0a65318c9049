// The fixture of the end-to-end tests on the local cluster (deploy/local-cluster, two nodes): a
// fresh namespace per test (Pod Security Admission enforcing `restricted` there), kubectl and an
// API client on the cluster's kubeconfig, hostPath volumes with the CIFAR-10 slice,
// CifarTrainJobs submitted as a user would, and on failure a diagnosis (the job's status, Events,
// its pods' and the operator's logs).
#pragma once

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "kube/client.h"
#include "kube/kubeconfig.h"
#include "tests/integration/cifartrainjobs.h"
#include "tests/integration/test_namespace.h"
#include "tests/support/monitor_records.h"
#include "tests/support/process.h"
#include "tests/support/tools.h"

namespace cifar::e2e {

using cifar::testing::epochs_not_training_each_sample_once;
using cifar::testing::recorded_epochs;

using cifar::kube::Client;
using cifar::testing::run_process;
using cifar::testing::tool_dir;
using nlohmann::json;
using std::chrono::seconds;

inline std::string env(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) throw std::runtime_error(std::string(name) + " is not set (ctest sets it)");
  return value;
}

// What the ctest fixtures made: build/e2e/{cluster,cifar10-slice,volumes}.
inline std::filesystem::path e2e_dir() { return env("CIFAR_E2E_DIR"); }
inline std::string cluster_file(const std::string& name) {
  return (e2e_dir() / "cluster" / name).string();
}

// The directory of the local cluster's node called `node` (deploy/local-cluster: node<i>/name
// holds its name), or "" if it is none of them.
inline std::filesystem::path node_dir(const std::string& node) {
  for (int i = 1; i <= 8; ++i) {
    auto dir = e2e_dir() / "cluster" / ("node" + std::to_string(i));
    std::ifstream file(dir / "name");
    std::string name;
    if (file >> name && name == node) return dir;
  }
  return {};
}

using Steady = std::chrono::steady_clock;

// Polls `predicate` until it holds or `timeout` passes, every 200 ms: a predicate here asks the
// API server (or runs kubectl, ~90 ms of CPU), and the cluster's state changes in seconds;
// polled every 50 ms, as the in-process tests poll, each waiting case asked ~20 times a second
// on the two cores the cases' jobs train on.
template <typename Predicate>
bool wait_for(Predicate predicate, std::chrono::milliseconds timeout) {
  return cifar::testing::wait_for(predicate, timeout, std::chrono::milliseconds(200));
}

inline double seconds_since(Steady::time_point start) {
  return std::chrono::duration<double>(Steady::now() - start).count();
}

inline const std::string kImage = "localhost/cifartrain/runtime:dev";

// The strategies and replicas most tests submit (YAML lines of the spec).
inline const std::string kPsSync =
    "  strategy: {type: ParameterServer, parameterServer: {mode: sync}}\n";
inline const std::string kPsAsync =
    "  strategy: {type: ParameterServer, parameterServer: {mode: async}}\n";
inline const std::string kAllReduce = "  strategy: {type: AllReduce, allReduce: {backend: gloo}}\n";
// `replicas` trainers (Workers) of an all-reduce job that ask for `gpus` nvidia.com/gpu each and
// run in RuntimeClass nvidia, as deploy/examples/gpu-allreduce-job.yaml's do (YAML lines).
inline std::string gpu_workers(int replicas, int gpus) {
  return "    Worker:\n      replicas: " + std::to_string(replicas) +
         "\n      resources: {limits: {nvidia.com/gpu: " + std::to_string(gpus) +
         "}}\n      template: {spec: {runtimeClassName: nvidia}}\n";
}
inline const std::string kPsReplicas =
    "    PS: {replicas: 1}\n    Master: {replicas: 1}\n    Worker: {replicas: 2}\n"
    "    Evaluator: {replicas: 1}\n";
// Epochs of a job that a fault interrupts: long enough (30-60 s) that the replacement pod runs
// before the job ends. (A deleted pod used to take its whole 30 s grace period to go, until
// cifar-train, PID 1 in its container, handled SIGTERM; a fresh-clone CI run caught it.)
constexpr int kLongEnoughToInterrupt = 4;
// Epochs of a job whose fault stops its training until the replacement runs (a sync PS or
// all-reduce job's lost pod, a frozen process, a dead node) and lands after its first checkpoint:
// it is mid-run when the fault lands, and a shorter rest of the run costs CI less.
constexpr int kLongEnoughToHalt = 3;

// For async PS jobs that train more than an epoch: async PS applies each of its trainers' pushes as
// a step of its own, on stale gradients, so 0.02 (the default of submit()) leaves simplecnn with
// three trainers at chance's loss on the edge of diverging (a CI run crash-looped on NaN after a
// node's death); 0.005 learns (the slice's test accuracy after 12 epochs: 9.5% against 33%).
inline const std::string kAsyncPsLearningRate = "0.005";

class Cluster : public ::testing::Test {
 protected:
  void SetUp() override {
    ns_ = cifar::testing::create_test_namespace(client_, "e2e", cifar::testing::kRestricted);
    // The namespace's default ServiceAccount (the controller-manager's) must exist before pods.
    ASSERT_TRUE(wait_for(
        [&] {
          return kubectl({"get", "serviceaccount", "default", "-n", ns_}).exit_code == 0;
        },
        seconds(30)));
    volumes_ = e2e_dir() / "volumes" / ns_;
    std::filesystem::create_directories(volumes_);
    // As a cluster's admin would: a container that sets no CPU limit gets one core, so that the
    // pods of the jobs side by side on the nodes' two cores train with one thread each (cifar-train
    // follows its cgroup's limit) instead of spinning against each other. The request is what the
    // scheduler assumes of a pod without one (100m): its spreading stays as it was.
    apply(
        "apiVersion: v1\nkind: LimitRange\nmetadata: {name: one-core}\nspec:\n  limits:\n"
        "  - {type: Container, default: {cpu: \"1\"}, defaultRequest: {cpu: 100m}}\n");
  }

  void TearDown() override {
    // The stall rule's false alarms (cifartrainjob/stall.h): every case but those that stop a
    // process on purpose counts them, whatever its faults (drains, preemptions, store outages).
    if (!stalls_expected_) {
      const auto alarms =
          kubectl({"get", "events", "-n", ns_, "--field-selector", "reason=TrainersStalled", "-o",
                   R"(jsonpath={range .items[*]}{.message}{"\n"}{end})"});
      EXPECT_EQ(alarms.output, "") << "the stall rule's false alarms";
    }
    if (HasFailure()) {
      for (const auto& job : jobs_) std::cerr << diagnose(job);
    }
    kubectl({"delete", "namespace", ns_, "--wait=false"});
    for (const auto& pv : persistent_volumes_) kubectl({"delete", "pv", pv, "--wait=false"});
  }

  cifar::testing::ProcessResult kubectl(std::vector<std::string> args) {
    args.insert(args.begin(), {"kubectl", "--kubeconfig", cluster_file("kubeconfig")});
    return run_process(args);
  }

  // `kubectl apply -f` of a manifest written to a file, as a user would (in namespace `ns`: the
  // test's by default).
  void apply(const std::string& manifest, const std::string& ns = "") {
    const auto path = volumes_ / ("manifest-" + std::to_string(manifests_++) + ".yaml");
    std::ofstream(path) << manifest;
    const auto applied = kubectl({"apply", "-n", ns.empty() ? ns_ : ns, "-f", path.string()});
    ASSERT_EQ(applied.exit_code, 0) << applied.output;
  }

  // A PersistentVolumeClaim `name` (in namespace `in`: the test's by default) bound to a hostPath
  // PersistentVolume at `path`.
  void host_volume(const std::string& name, const std::filesystem::path& path, bool read_only,
                   const std::string& in = "") {
    const auto ns = in.empty() ? ns_ : in;
    const auto pv = ns + "-" + name;
    persistent_volumes_.push_back(pv);
    const std::string mode = read_only ? "ReadOnlyMany" : "ReadWriteMany";
    apply("apiVersion: v1\nkind: PersistentVolume\nmetadata: {name: " + pv +
              "}\nspec:\n  capacity: {storage: 1Gi}\n  accessModes: [" + mode +
              "]\n  storageClassName: ''\n  persistentVolumeReclaimPolicy: Retain\n"
              "  hostPath: {path: " +
              path.string() + ", type: Directory}\n  claimRef: {namespace: " + ns +
              ", name: " + name +
              "}\n---\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: " + name +
              "}\nspec:\n  accessModes: [" + mode + "]\n  storageClassName: ''\n  volumeName: " +
              pv + "\n  resources: {requests: {storage: 1Gi}}\n",
          ns);
    // Bound before a pod names it: else the scheduler's first word on the pod is the unbound
    // claim, not what the case is about.
    EXPECT_TRUE(wait_for(
        [&] {
          return kubectl({"get", "pvc", name, "-n", ns, "-o", "jsonpath={.status.phase}"}).output ==
                 "Bound";
        },
        seconds(30)))
        << "claim " << name << " in " << ns << " not bound";
  }

  // The slice of CIFAR-10 (read-only; at `data`, a view of it) and a fresh shared checkpoint
  // directory, as claims.
  void data_and_checkpoint_volumes(const std::filesystem::path& data = e2e_dir() /
                                                                       "cifar10-slice") {
    host_volume("cifar10", data, true);
    const auto checkpoints = volumes_ / "checkpoints";
    std::filesystem::create_directories(checkpoints);
    ::chmod(checkpoints.c_str(), 0777);  // the pods' user (65532) writes there
    host_volume("checkpoints", checkpoints, false);
  }

  // A CifarTrainJob on the CIFAR-10 slice; `strategy` and `replicas` are YAML lines.
  void submit(const std::string& name, const std::string& strategy, const std::string& replicas,
              const std::string& extra = "", const std::string& dataset = "cifar10", int epochs = 1,
              const std::string& learning_rate = "0.02") {
    jobs_.push_back(name);
    apply("apiVersion: cifartrain.io/v1alpha1\nkind: CifarTrainJob\nmetadata: {name: " + name +
          "}\nspec:\n  image: " + image_ +
          "\n  model: {name: simplecnn}\n"
          "  dataset: {name: " +
          dataset + ", " +
          (dataset_source_.empty() ? "volume: {claimName: cifar10}" : dataset_source_) +
          "}\n"
          "  training: {epochs: " +
          std::to_string(epochs) + ", batchSize: " + std::to_string(batch_size_) +
          ", learningRate: {base: " + learning_rate + ", schedule: constant}" +
          (device_.empty() ? "" : ", device: " + device_) +
          "}\n"
          "  checkpoint: {" +
          (checkpoint_store_.empty() ? "volume: {claimName: checkpoints}" : checkpoint_store_) +
          ", everySteps: " + std::to_string(checkpoint_every_steps_) + "}\n" + strategy +
          "  replicaSpecs:\n" + replicas + extra);
  }

  json job(const std::string& name) {
    return client_.get(cifar::testing::cifartrainjobs(ns_).named(name));
  }
  // The job's status; {} before the operator first wrote it.
  json status_of(const std::string& name) { return job(name).value("status", json::object()); }
  std::string state(const std::string& name) { return status_of(name).value("state", ""); }
  // Until job `name` is in state `wanted`; false at once when it ended otherwise (an ended job
  // stays as it ended: a failed case reports in seconds, not after its whole budget).
  bool wait_for_state(const std::string& name, const std::string& wanted, seconds timeout) {
    std::string now;
    wait_for(
        [&] {
          now = state(name);
          return now == wanted || now == "Succeeded" || now == "Failed";
        },
        timeout);
    return now == wanted;
  }

  std::vector<json> pods_of(const std::string& name) {
    return client_.list(cifar::kube::pods(ns_), testing::labelled_with_job(name))["items"];
  }
  // Until the job trains: its chief has taken steps (status.progress, which the operator reads
  // from the chief's metrics). A fault made after this lands mid-run.
  bool wait_until_training(const std::string& name) {
    return wait_for(
        [&] { return status_of(name).value("progress", json::object()).value("step", 0) > 0; },
        seconds(120));
  }

  // The run's directory (status.modelDir) as the test, on the nodes' machine, sees the pods'
  // /checkpoints volume.
  std::filesystem::path run_dir(const std::string& job) {
    std::string pod_dir;
    wait_for([&] { return !(pod_dir = status_of(job).value("modelDir", "")).empty(); },
             seconds(30));
    const std::string mount = "/checkpoints/";
    if (pod_dir.rfind(mount, 0) != 0) throw std::runtime_error("modelDir " + pod_dir);
    return volumes_ / "checkpoints" / pod_dir.substr(mount.size());
  }
  // Until the run has a checkpoint (a .pt file in its directory).
  static bool wait_for_checkpoint(const std::filesystem::path& dir) {
    return wait_for(
        [&] {
          if (!std::filesystem::is_directory(dir)) return false;
          for (const auto& f : std::filesystem::directory_iterator(dir)) {
            if (f.path().extension() == ".pt") return true;
          }
          return false;
        },
        seconds(120));
  }
  // The step of the run's newest checkpoint (named <prefix>-step-NNNNNNNNNN.pt); -1 if none.
  static int64_t newest_checkpoint_step(const std::filesystem::path& dir) {
    int64_t newest = -1;
    for (const auto& f : std::filesystem::directory_iterator(dir)) {
      const auto name = f.path().filename().string();
      const auto at = name.rfind("-step-");
      if (f.path().extension() != ".pt" || at == std::string::npos) continue;
      newest = std::max<int64_t>(newest, std::stoll(name.substr(at + 6)));
    }
    return newest;
  }
  // The slice's training samples (cifar10-slice.sh: 300 of each of the 5 training batches).
  static constexpr int64_t kSliceTrainingSamples = 1500;
  // What a run that trained every epoch once, whatever restarted under it, has in its
  // monitor.jsonl (testing::recorded_epochs).
  static std::vector<int> every_epoch_once(int epochs) {
    std::vector<int> each(static_cast<size_t>(epochs));
    for (int i = 0; i < epochs; ++i) each[static_cast<size_t>(i)] = i + 1;
    return each;
  }
  // A job on the slice that recorded each of its `epochs` once, each training every sample of the
  // slice once (the chief's tally of what all its trainers trained, whatever the world was).
  void expect_every_epoch_to_train_each_sample_once(const std::string& job, int epochs) {
    EXPECT_EQ(recorded_epochs(run_dir(job)), every_epoch_once(epochs)) << job;
    EXPECT_EQ(epochs_not_training_each_sample_once(run_dir(job), kSliceTrainingSamples),
              std::vector<json>{})
        << job;
  }
  // An elastic job on the slice (its data and a shared checkpoint volume) whose trainers read 25
  // samples a step: the global batches of the tests' worlds divide the slice's 1500 samples, so
  // that an epoch trains each once.
  void submit_elastic(const std::string& name, const std::string& strategy,
                      const std::string& replicas, const std::string& extra, int epochs) {
    data_and_checkpoint_volumes();
    checkpoint_every_steps_ = 8;
    batch_size_ = 25;
    submit(name, strategy, replicas, extra, "cifar10", epochs);
  }

  // The nodes the job's pods are on, by pod name (pods not yet placed are left out).
  std::map<std::string, std::string> placement(const std::string& job) {
    std::map<std::string, std::string> nodes;
    for (const auto& p : pods_of(job)) {
      const auto node_name = p["spec"].value("nodeName", "");
      if (!node_name.empty()) nodes[p["metadata"]["name"]] = node_name;
    }
    return nodes;
  }
  static std::set<std::string> nodes_of(const std::map<std::string, std::string>& placed) {
    std::set<std::string> nodes;
    for (const auto& [pod_name, node_name] : placed) nodes.insert(node_name);
    return nodes;
  }

  json pod(const std::string& name) { return client_.get(cifar::kube::pods(ns_).named(name)); }
  std::string uid(const std::string& pod_name) { return pod(pod_name)["metadata"]["uid"]; }
  // Whether pod `name` is there and is not the one whose uid was `old_uid`: its replacement.
  bool replaced(const std::string& name, const std::string& old_uid) {
    try {
      return uid(name) != old_uid;
    } catch (const cifar::kube::ApiError&) {
      return false;
    }
  }
  // Until pod `name`'s replacement (not `old_uid`) has logged what `said` finds in `log` (the
  // log, every 2 s: each look runs kubectl).
  bool wait_for_replacement_log(const std::string& name, const std::string& old_uid,
                                const std::function<bool(const std::string&)>& said,
                                std::string& log, seconds timeout) {
    return cifar::testing::wait_for(
        [&] { return replaced(name, old_uid) && said(log = logs(name)); }, timeout, seconds(2));
  }
  // The in-place restarts of a pod's (first) container, as its status shows them.
  static int restart_count_of(const json& pod) {
    const auto statuses =
        pod.value("status", json::object()).value("containerStatuses", json::array());
    return statuses.empty() ? 0 : statuses[0].value("restartCount", 0);
  }
  int restart_count(const std::string& name) { return restart_count_of(pod(name)); }
  bool pod_exists(const std::string& name) {
    try {
      pod(name);
      return true;
    } catch (const cifar::kube::ApiError& e) {
      if (e.status() == 404) return false;
      throw;
    }
  }
  std::string phase(const std::string& name) {
    try {
      return pod(name)["status"].value("phase", "");
    } catch (const cifar::kube::ApiError&) {
      return "";
    }
  }

  // The host PID of the pod's container, from its node's containerd (every node of the local
  // cluster is this machine: one PID namespace).
  int container_pid(const std::string& pod_name) { return pid_of_container(pod(pod_name)); }
  static int pid_of_container(const json& pod_object) {
    const auto statuses =
        pod_object.value("status", json::object()).value("containerStatuses", json::array());
    if (statuses.empty()) return 0;  // not started yet
    const auto id = statuses[0].value("containerID", "");
    if (id.find("://") == std::string::npos) return 0;
    const auto bare = id.substr(id.find("://") + 3);
    const auto node = node_dir(pod_object["spec"].value("nodeName", ""));
    if (node.empty()) return 0;
    const auto tasks = run_process(
        {"ctr", "--address", (node / "containerd.sock").string(), "-n", "k8s.io", "tasks", "ls"});
    std::istringstream lines(tasks.output);
    std::string task;
    int pid = 0;
    std::string rest;
    std::getline(lines, rest);  // TASK PID STATUS
    while (lines >> task >> pid) {
      std::getline(lines, rest);
      if (task == bare) return pid;
    }
    return 0;
  }

  // An idle pod (the cluster's pause image) named `name` in `ns` on node `node`, labelled
  // `labels` (a YAML flow mapping), restricted as the job's own pods are.
  void idle_pod(const std::string& name, const std::string& ns, const std::string& node,
                const std::string& labels) {
    apply("apiVersion: v1\nkind: Pod\nmetadata: {name: " + name + ", labels: " + labels +
              "}\nspec:\n  nodeName: " + node +
              "\n  securityContext: {runAsNonRoot: true, runAsUser: 65535, seccompProfile: "
              "{type: RuntimeDefault}}\n  containers:\n  - name: idle\n"
              "    image: localhost/cifartrain/pause:dev\n    imagePullPolicy: Never\n"
              "    securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: "
              "[ALL]}}\n",
          ns);
  }

  int pid_in(const std::string& ns, const std::string& name) {
    int pid = 0;
    wait_for(
        [&] {
          try {
            const auto object = client_.get(cifar::kube::pods(ns).named(name));
            return (pid = pid_of_container(object)) > 0;
          } catch (const cifar::kube::ApiError&) {
            return false;
          }
        },
        seconds(60));
    return pid;
  }

  // What a TCP connection from the network namespace of process `pid` to ip:port meets within
  // 3 s: a listener (opened), the pod's own stack with nothing listening (refused: a reset), or
  // nothing (timed out: the policy agent drops the SYN, it never resets); anything else (the
  // namespace gone, ...) is a failure of the check itself.
  enum class Reach { kOpened, kRefused, kTimedOut, kCheckFailed };
  static Reach reach(int pid, const std::string& ip, int port) {
    const auto result =
        run_process({"nsenter", "--net=/proc/" + std::to_string(pid) + "/ns/net", "--", "timeout",
                     "3", "bash", "-c", "exec 3<>/dev/tcp/" + ip + "/" + std::to_string(port)});
    if (result.exit_code == 0) return Reach::kOpened;
    if (result.exit_code == 124) return Reach::kTimedOut;
    return result.output.find("Connection refused") != std::string::npos ? Reach::kRefused
                                                                         : Reach::kCheckFailed;
  }
  static const char* name_of(Reach reach) {
    switch (reach) {
      case Reach::kOpened:
        return "opened";
      case Reach::kRefused:
        return "refused";
      case Reach::kTimedOut:
        return "timed out";
      case Reach::kCheckFailed:
        break;
    }
    return "the check failed";
  }

  // kubectl patch of runPolicy.suspend, as a user suspends and resumes a job.
  cifar::testing::ProcessResult suspend(const std::string& name, bool on) {
    return kubectl(
        {"patch", "ctj", name, "-n", ns_, "--type=merge", "-p",
         std::string(R"({"spec":{"runPolicy":{"suspend":)") + (on ? "true" : "false") + "}}}"});
  }

  // An elastic job (docs/ARCHITECTURE.md, "Elastic jobs"): `kubectl scale`, as a user resizes it.
  int scale(const std::string& job, int replicas) {
    const auto scaled = kubectl(
        {"scale", "cifartrainjob/" + job, "-n", ns_, "--replicas=" + std::to_string(replicas)});
    EXPECT_EQ(scaled.exit_code, 0) << scaled.output;
    return scaled.exit_code;
  }
  std::string logs(const std::string& pod_name) {
    return kubectl({"logs", pod_name, "-n", ns_}).output;
  }
  // Whether `pod_name` trains in a round of `world` ranks (its log's "rank R of N: gloo").
  bool trains_in_a_world_of(const std::string& pod_name, int world) {
    return logs(pod_name).find(" of " + std::to_string(world) + ": gloo process group") !=
           std::string::npos;
  }
  // status.progress.world.workers: the workers of the group that trains now, as the operator
  // scraped them.
  json world_workers(const std::string& job) {
    return status_of(job)
        .value("progress", json::object())
        .value("world", json::object())
        .value("workers", json());
  }
  // The messages of the namespace's Events of `reason`, space-separated.
  std::string events(const std::string& reason) {
    return kubectl({"get", "events", "-n", ns_, "--field-selector", "reason=" + reason, "-o",
                    "jsonpath={.items[*].message}"})
        .output;
  }
  // Waits until the namespace's Events of `reason` say every one of `phrases`.
  bool events_say(const std::string& reason, const std::vector<std::string>& phrases,
                  seconds timeout = seconds(30)) {
    return wait_for(
        [&] {
          const auto said = events(reason);
          return std::all_of(phrases.begin(), phrases.end(), [&](const std::string& phrase) {
            return said.find(phrase) != std::string::npos;
          });
        },
        timeout);
  }
  // Waits until the operator sees an elastic job's world as `workers` (the indices of the
  // workers training now) and, where given, its WORKERS column (status.workers.summary) as
  // `summary`.
  bool world_becomes(const std::string& job, const json& workers, seconds timeout,
                     const std::string& summary = "") {
    return wait_for(
        [&] {
          return world_workers(job) == workers &&
                 (summary.empty() ||
                  status_of(job).value("workers", json::object()).value("summary", "") == summary);
        },
        timeout);
  }

  // Whether pod `pod_name`'s current container has trained a step since it said `since` (on its
  // way back from a restart): a progress line "epoch E/N step S" after that in its log. Before
  // its first step a process is still starting (outside the graceful stop's window, so a SIGTERM
  // then ends it at once with nothing new to save).
  bool trained_since(const std::string& pod_name, const std::string& since) {
    const auto log = kubectl({"logs", pod_name, "-n", ns_}).output;
    const auto at = log.rfind(since);
    if (at == std::string::npos) return false;
    static const std::regex progress_line(R"(epoch \d+/\d+ step \d+)");
    return std::regex_search(log.begin() + static_cast<std::ptrdiff_t>(at), log.end(),
                             progress_line);
  }

  // A pod's log from now until its container ends (kubectl logs -f in the background): what a
  // pod that is about to be deleted says on its way out.
  std::unique_ptr<cifar::testing::ChildProcess> follow_log(const std::string& pod_name,
                                                           const std::filesystem::path& file) {
    return std::make_unique<cifar::testing::ChildProcess>(
        std::vector<std::string>{"kubectl", "--kubeconfig", cluster_file("kubeconfig"), "logs",
                                 "-f", pod_name, "-n", ns_},
        file);
  }

  // What an interruption (a suspend, a preemption, a drain) cost the run: the step the chief
  // stopped after (the last it trained; its log on the way out), the step the job resumed from
  // (the new chief's log) and the seconds from SIGTERM to exit. Printed for docs/BENCHMARKS.md.
  struct Interruption {
    int64_t stopped_after = -1;
    int64_t resumed_from = -1;
    double seconds_to_exit = -1;
    [[nodiscard]] int64_t steps_lost() const { return stopped_after - resumed_from; }
  };
  static Interruption interruption(const std::string& what, const std::string& log_on_the_way_out,
                                   const std::string& resumed_log) {
    Interruption i;
    i.stopped_after = number_after(log_on_the_way_out, "stopped on request: ", " epochs, ");
    i.seconds_to_exit = number_after(log_on_the_way_out, "exiting ", "");
    i.resumed_from = number_after(resumed_log, "resumed at step ", "");
    if (i.resumed_from < 0) i.resumed_from = number_after(resumed_log, "starting at version ", "");
    std::cerr << "interruption | " << what << " | trained to step " << i.stopped_after
              << " | resumed from step " << i.resumed_from << " | steps lost " << i.steps_lost()
              << " | " << i.seconds_to_exit << " s from SIGTERM to exit\n";
    return i;
  }
  // After an interruption: run the job to Succeeded, or stop watching once its chief's
  // replacement has said where it resumed (the rest of the run shows nothing more of it).
  enum class Then { kFinish, kStopAtTheResume };
  // Interrupts running job `name` with `interrupt` (which returns once `chief`, the pod of its
  // chief, is gone), brings it back with `bring_back`, waits as `then` says, and expects the
  // interruption (named `what`) to have lost at most one step: interruption()'s figures.
  Interruption interrupt_and_finish(const std::string& name, const std::string& chief,
                                    const std::string& what, const std::function<void()>& interrupt,
                                    const std::function<void()>& bring_back,
                                    Then then = Then::kFinish) {
    const auto way_out = volumes_ / (chief + ".interrupted.log");
    const auto interrupted_uid = uid(chief);
    auto follower = follow_log(chief, way_out);
    std::this_thread::sleep_for(seconds(1));  // following
    EXPECT_NE(state(name), "Succeeded") << "the job ended before it could be interrupted";
    interrupt();
    EXPECT_TRUE(wait_for([&] { return !follower->running(); }, seconds(120)))
        << chief << " is still running after the interruption";
    follower->kill_hard();  // reaps it: gone already, or given up on
    bring_back();
    std::string resumed;
    if (then == Then::kFinish) {
      EXPECT_TRUE(wait_for_state(name, "Succeeded", seconds(400))) << diagnose(name);
      resumed = logs(chief);
    } else {
      // The replacement's log, not the interrupted pod's (which may still be listed).
      EXPECT_TRUE(wait_for_replacement_log(
          chief, interrupted_uid,
          [](const std::string& log) {
            return log.find("resumed at step ") != std::string::npos ||
                   log.find("starting at version ") != std::string::npos;
          },
          resumed, seconds(300)))
          << resumed << diagnose(name);
      EXPECT_NE(state(name), "Failed") << diagnose(name);
    }
    const auto said = cifar::testing::read_file(way_out);
    const auto cost = interruption(what, said, resumed);
    EXPECT_GT(cost.stopped_after, 0) << said;
    EXPECT_GE(cost.resumed_from, cost.stopped_after - 1) << resumed;
    return cost;
  }
  // A suspend of job `name` until its pods are gone, and the resume.
  std::pair<std::function<void()>, std::function<void()>> suspension(const std::string& name) {
    return {[this, name] {
              ASSERT_EQ(suspend(name, true).exit_code, 0);
              ASSERT_TRUE(wait_for_state(name, "Suspended", seconds(60)));
              ASSERT_TRUE(wait_for([&] { return pods_of(name).empty(); }, seconds(60)));
            },
            [this, name] { ASSERT_EQ(suspend(name, false).exit_code, 0); }};
  }

  // The number after `said` (and after `then`, when given) in `log`; -1 when there is none there
  // (a rank that stopped with another says "exiting with the other ranks").
  static double number_after(const std::string& log, const std::string& said,
                             const std::string& then) {
    auto at = log.find(said);
    if (at == std::string::npos) return -1;
    at += said.size();
    if (!then.empty()) {
      at = log.find(then, at);
      if (at == std::string::npos) return -1;
      at += then.size();
    }
    try {
      return std::stod(log.substr(at));
    } catch (const std::invalid_argument&) {
      return -1;
    }
  }

  std::string diagnose(const std::string& name) {
    std::string out = "---- job " + name + " status:\n";
    out += kubectl({"get", "ctj", name, "-n", ns_, "-o", "jsonpath={.status}"}).output;
    out += "\n---- events:\n" +
           kubectl({"get", "events", "-n", ns_, "--sort-by=.lastTimestamp"}).output;
    out += "---- pods:\n" + kubectl({"get", "pods", "-n", ns_, "-o", "wide"}).output;
    // A node that is not Ready, under pressure or tainted explains pods evicted or not placed.
    out += "---- nodes (conditions that are True, taints):\n" +
           kubectl({"get", "nodes", "-o",
                    "jsonpath={range .items[*]}{.metadata.name}: "
                    "{range .status.conditions[?(@.status!=\"False\")]}{.type}={.status} "
                    "{end}taints: {.spec.taints}{\"\\n\"}{end}"})
               .output;
    for (const auto& p : pods_of(name)) {
      const auto pod_name = p["metadata"]["name"].get<std::string>();
      out += "---- logs of " + pod_name + ":\n" +
             kubectl({"logs", pod_name, "-n", ns_, "--tail=40"}).output;
      // A crash loop's cause is in the container that ended, not in the one now starting.
      if (restart_count_of(p) > 0) {
        out += "---- logs of " + pod_name + "'s previous container:\n" +
               kubectl({"logs", pod_name, "-n", ns_, "--previous", "--tail=40"}).output;
      }
    }
    out += "---- operator:\n" +
           kubectl({"logs", "-n", "cifartrain-system", "deployment/cifar-operator", "--tail=40"})
               .output;
    return out;
  }

  Client client_{cifar::kube::load_kubeconfig(cluster_file("kubeconfig"))};
  std::string ns_;
  std::string image_ = kImage;  // of the jobs submit() makes
  // checkpoint.everySteps of the jobs submit() makes; 0 saves once an epoch, so that a test of an
  // interruption shows what the graceful stop saves that the schedule would not.
  int checkpoint_every_steps_ = 4;
  int batch_size_ = 32;  // each trainer's (an elastic all-reduce job's: per slot of maxReplicas)
  // training.device of the jobs submit() makes ("": the CRD's default, auto).
  std::string device_;
  // What the jobs submit() makes keep their checkpoints in instead of the claim `checkpoints`:
  // YAML fields of spec.checkpoint (uri and s3).
  std::string checkpoint_store_;
  // spec.dataset's source for submit(): "" the claim cifar10; else its fields ("uri: s3://...").
  std::string dataset_source_;
  // Whether the case stops a process on purpose, so that its jobs' stalls are no false alarms.
  bool stalls_expected_ = false;
  std::filesystem::path volumes_;
  std::vector<std::string> jobs_;
  std::vector<std::string> persistent_volumes_;
  int manifests_ = 0;
};

}  // namespace cifar::e2e
