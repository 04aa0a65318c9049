// cifar-operator, the real binary, against the real kube-apiserver. No kubelet runs: the tests
// play it, writing pod phases and exit codes through the status subresource.
#include <gtest/gtest.h>

#include <csignal>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "contract/labels.h"
#include "kube/client.h"
#include "security/certificates.h"
#include "tests/integration/cifartrainjobs.h"
#include "tests/integration/test_namespace.h"
#include "tests/support/process.h"

namespace {

using cifar::kube::Client;
using cifar::kube::PatchType;
using cifar::testing::ChildProcess;
using cifar::testing::TempDir;
using nlohmann::json;
using std::chrono::seconds;

const std::string kSource = CIFAR_SOURCE_DIR;

std::string kubeconfig() {
  const char* path = std::getenv("CIFAR_KUBECONFIG");
  if (path == nullptr) throw std::runtime_error("CIFAR_KUBECONFIG is not set (ctest sets it)");
  return path;
}

class Operator : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const auto created = cifar::testing::run_process(
        {"kubectl", "--kubeconfig", kubeconfig(), "apply", "--server-side", "-f",
         kSource + "/deploy/crds/cifartrain.io_cifartrainjobs.yaml"});
    ASSERT_EQ(created.exit_code, 0) << created.output;
    const auto established = cifar::testing::run_process(
        {"kubectl", "--kubeconfig", kubeconfig(), "wait", "--for=condition=Established",
         "--timeout=60s", "crd/cifartrainjobs.cifartrain.io"});
    ASSERT_EQ(established.exit_code, 0) << established.output;
  }

  void SetUp() override {
    ns_ = cifar::testing::create_test_namespace(client_, "op");
    start_operator();
  }

  void start_operator() {
    metrics_port_ = cifar::testing::free_port();
    operator_ = launch_operator(metrics_port_);
  }

  // Another instance of the operator, ready: leading with synced caches, or standing by. Short
  // lease timings so that a takeover is quick.
  std::unique_ptr<ChildProcess> launch_operator(int metrics_port = cifar::testing::free_port()) {
    const auto health_port = cifar::testing::free_port();
    auto process = std::make_unique<ChildProcess>(
        std::vector<std::string>{
            CIFAR_OPERATOR_BIN, "--kubeconfig", kubeconfig(), "--namespace", ns_, "--metrics-port",
            std::to_string(metrics_port), "--health-port", std::to_string(health_port),
            "--leader-elect-lease-duration", "5", "--leader-elect-renew-deadline", "4",
            "--leader-elect-retry-period", "0.5", "--progress-interval", "0.5"},
        log_path(starts_++));
    EXPECT_TRUE(cifar::testing::wait_for(
        [&] {
          return cifar::testing::http_get("http://127.0.0.1:" + std::to_string(health_port) +
                                          "/readyz") == "ok";
        },
        seconds(30)))
        << log();
    return process;
  }

  std::filesystem::path log_path(int start) {
    return dir_.path() / ("operator-" + std::to_string(start) + ".log");
  }

  std::string log() {
    std::string all;
    for (int i = 0; i < starts_; ++i) all += cifar::testing::read_file(log_path(i));
    return all;
  }

  void submit(const std::string& name, const json& spec) {
    client_.create(cifar::testing::cifartrainjobs(ns_), {{"apiVersion", "cifartrain.io/v1alpha1"},
                                                         {"kind", "CifarTrainJob"},
                                                         {"metadata", {{"name", name}}},
                                                         {"spec", spec}});
  }

  std::vector<json> pods_of(const std::string& job) {
    return client_.list(cifar::kube::pods(ns_), cifar::testing::labelled_with_job(job))["items"];
  }

  std::set<std::string> pod_names(const std::string& job) {
    std::set<std::string> names;
    for (const auto& p : pods_of(job)) {
      if (!p["metadata"].contains("deletionTimestamp")) names.insert(p["metadata"]["name"]);
    }
    return names;
  }

  json lease() { return client_.get(cifar::kube::leases(ns_).named("cifar-operator"))["spec"]; }

  json job_status(const std::string& name) {
    return client_.get(cifar::testing::cifartrainjobs(ns_).named(name))
        .value("status", json::object());
  }

  bool wait_for_state(const std::string& job, const std::string& state) {
    return cifar::testing::wait_for([&] { return job_status(job).value("state", "") == state; },
                                    seconds(30));
  }

  // As a kubelet: the pod's phase, its container's exit code once it ended, and how often the
  // kubelet restarted the container in place.
  void set_phase(const std::string& pod, const std::string& phase, int exit_code = 0,
                 int restart_count = 0) {
    json container = {{"name", "cifar-train"},
                      {"image", "x"},
                      {"imageID", ""},
                      {"ready", phase == "Running"},
                      {"restartCount", restart_count}};
    if (phase == "Running") {
      container["state"] = {{"running", json::object()}};
    } else {
      container["state"] = {{"terminated", {{"exitCode", exit_code}, {"reason", "Completed"}}}};
    }
    client_.patch(cifar::kube::pods(ns_).named(pod).sub("status"),
                  {{"status", {{"phase", phase}, {"containerStatuses", json::array({container})}}}},
                  PatchType::kMerge);
  }

  // As a kubelet: the pod's IP, where the operator finds its metrics endpoint.
  void set_pod_ip(const std::string& pod, const std::string& ip) {
    client_.patch(cifar::kube::pods(ns_).named(pod).sub("status"),
                  {{"status", {{"podIP", ip}, {"podIPs", json::array({{{"ip", ip}}})}}}},
                  PatchType::kMerge);
  }

  // The operator's /metrics (the leader started by start_operator()).
  std::string metrics() {
    return cifar::testing::http_get("http://127.0.0.1:" + std::to_string(metrics_port_) +
                                    "/metrics");
  }

  // The value of the series `name` of this test's job `job` whose labels include `labels`, if
  // the operator exports one.
  std::optional<double> job_metric(const std::string& name, const std::string& job,
                                   std::map<std::string, std::string> labels = {}) {
    labels["job_namespace"] = ns_;
    labels["job_name"] = job;
    std::istringstream lines(metrics());
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind(name + "{", 0) != 0) continue;
      const auto end = line.find("} ");
      if (end == std::string::npos) continue;
      const auto label_set = "," + line.substr(name.size() + 1, end - name.size() - 1) + ",";
      bool all = true;
      for (const auto& [key, value] : labels) {
        all = all && label_set.find("," + key + "=\"" + value + "\",") != std::string::npos;
      }
      if (all) return std::stod(line.substr(end + 2));
    }
    return std::nullopt;
  }

  static json ps_spec(const std::string& restart_policy = "OnFailure", int backoff_limit = 3) {
    auto spec = json::parse(R"({"image": "cifar-train:test", "model": {"name": "resnet20"},
      "dataset": {"name": "synthetic"},
      "strategy": {"type": "ParameterServer", "parameterServer": {"mode": "sync"}},
      "replicaSpecs": {"PS": {"replicas": 1}, "Master": {"replicas": 1},
                       "Worker": {"replicas": 2}, "Evaluator": {"replicas": 1}},
      "checkpoint": {"volume": {"claimName": "checkpoints"}}})");
    spec["runPolicy"] = {{"restartPolicy", restart_policy}, {"backoffLimit", backoff_limit}};
    return spec;
  }

  Client client_{cifar::kube::load_kubeconfig(kubeconfig())};
  std::string ns_;
  TempDir dir_;
  int starts_ = 0;
  int metrics_port_ = 0;
  std::unique_ptr<ChildProcess> operator_;
};

const std::set<std::string> kPsJobPods = {"j-ps-0", "j-master-0", "j-worker-0", "j-worker-1",
                                          "j-evaluator-0"};

TEST_F(Operator, AJobGetsExactlyItsServiceAndPods) {
  submit("j", ps_spec());
  ASSERT_TRUE(cifar::testing::wait_for([&] { return pod_names("j") == kPsJobPods; }, seconds(30)))
      << log();
  const auto service = client_.get(cifar::kube::services(ns_).named("j"));
  EXPECT_EQ(service["spec"]["clusterIP"], "None");
  for (const auto& pod : pods_of("j")) {
    EXPECT_EQ(pod["metadata"]["ownerReferences"][0]["kind"], "CifarTrainJob");
    if (pod["metadata"]["name"] != "j-worker-1") continue;
    const auto& env = pod["spec"]["containers"][0]["env"];
    EXPECT_EQ(env[0]["name"], "TF_CONFIG");
    EXPECT_EQ(json::parse(env[0]["value"].get<std::string>())["task"],
              json({{"index", 1}, {"type", "worker"}}));
    EXPECT_EQ(pod["spec"]["subdomain"], "j");
  }
  // The job's token Secret and NetworkPolicy, owned by it like the Service.
  const auto secret = client_.get(cifar::kube::secrets(ns_).named("j-token"));
  EXPECT_EQ(secret["metadata"]["ownerReferences"][0]["kind"], "CifarTrainJob");
  EXPECT_EQ(secret["data"]["token"].get<std::string>().size(), 88U);  // 64 hex digits, base64
  const auto policy = client_.get(cifar::kube::network_policies(ns_).named("j"));
  EXPECT_EQ(policy["spec"]["podSelector"]["matchLabels"][cifar::contract::label::kJobName], "j");
  EXPECT_TRUE(wait_for_state("j", "Created")) << job_status("j").dump();
  std::this_thread::sleep_for(std::chrono::seconds(1));  // a few more rounds: still exactly these
  EXPECT_EQ(pods_of("j").size(), kPsJobPods.size());
}

TEST_F(Operator, RunningThenTheMastersSuccessEndsTheJobAndCleansUp) {
  submit("j", ps_spec());
  ASSERT_TRUE(cifar::testing::wait_for([&] { return pod_names("j") == kPsJobPods; }, seconds(30)));
  for (const auto& name : kPsJobPods) set_phase(name, "Running");
  EXPECT_TRUE(wait_for_state("j", "Running")) << job_status("j").dump() << log();
  set_phase("j-worker-0", "Succeeded");  // not the chief: the job goes on
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(job_status("j")["state"], "Running");
  set_phase("j-master-0", "Succeeded");
  EXPECT_TRUE(wait_for_state("j", "Succeeded")) << job_status("j").dump() << log();
  // cleanPodPolicy Running: the PS, worker 1 and the evaluator go; the finished pods stay.
  EXPECT_TRUE(cifar::testing::wait_for(
      [&] {
        return pod_names("j") == std::set<std::string>{"j-master-0", "j-worker-0"};
      },
      seconds(30)))
      << log();
  EXPECT_TRUE(job_status("j").contains("completionTime"));
}

TEST_F(Operator, ItsMetricsShowEachJobsPodsByPhaseAndRestartsUntilTheJobIsDeleted) {
  submit("j", ps_spec());
  ASSERT_TRUE(cifar::testing::wait_for([&] { return pod_names("j") == kPsJobPods; }, seconds(30)));
  using Labels = std::map<std::string, std::string>;
  const auto pods = [&](const std::string& type, const std::string& phase) {
    return job_metric("cifar_operator_job_pods", "j",
                      Labels{{"replica_type", type}, {"phase", phase}});
  };
  // No kubelet runs: the pods stay Pending. Every phase has a series, 0 for none.
  EXPECT_TRUE(
      cifar::testing::wait_for([&] { return pods("worker", "Pending") == 2.0; }, seconds(30)))
      << metrics() << log();
  EXPECT_EQ(pods("ps", "Pending"), 1.0);
  EXPECT_EQ(pods("master", "Running"), 0.0);
  EXPECT_EQ(pods("evaluator", "Unknown"), 0.0);
  EXPECT_EQ(job_metric("cifar_operator_job_restarts", "j"), 0.0) << metrics();

  for (const auto& name : kPsJobPods) set_phase(name, "Running");
  EXPECT_TRUE(cifar::testing::wait_for(
      [&] { return pods("worker", "Running") == 2.0 && pods("master", "Running") == 1.0; },
      seconds(30)))
      << metrics();
  EXPECT_EQ(pods("worker", "Pending"), 0.0);
  // The kubelet restarts worker 1's container in place: a restart as backoffLimit counts it.
  set_phase("j-worker-1", "Running", 0, 1);
  EXPECT_TRUE(cifar::testing::wait_for(
      [&] { return job_metric("cifar_operator_job_restarts", "j") == 1.0; }, seconds(30)))
      << metrics();

  // A deleted job's series go with it.
  client_.remove(cifar::testing::cifartrainjobs(ns_).named("j"));
  EXPECT_TRUE(cifar::testing::wait_for(
      [&] {
        const auto served = metrics();
        return !served.empty() && served.find("job_namespace=\"" + ns_ + "\"") == std::string::npos;
      },
      seconds(30)))
      << metrics();
}

TEST_F(Operator, ExitCodeRestartsRecreateThePodAndCountTowardsTheBackoffLimit) {
  submit("j", ps_spec("ExitCode", 1));
  ASSERT_TRUE(cifar::testing::wait_for([&] { return pod_names("j") == kPsJobPods; }, seconds(30)));
  const auto uid = [&] {
    return client_.get(cifar::kube::pods(ns_).named("j-worker-0"))["metadata"]["uid"]
        .get<std::string>();
  };
  const auto first = uid();
  set_phase("j-worker-0", "Failed", 137);  // killed: retryable
  ASSERT_TRUE(cifar::testing::wait_for(
      [&] {
        try {
          return uid() != first;
        } catch (const cifar::kube::ApiError&) {
          return false;
        }
      },
      seconds(30)))
      << log();
  EXPECT_EQ(job_status("j")["restarts"], 1);
  set_phase("j-worker-0", "Failed", 137);  // again: over backoffLimit 1
  EXPECT_TRUE(wait_for_state("j", "Failed")) << job_status("j").dump();
  EXPECT_EQ(job_status("j")["conditions"].back()["reason"], "BackoffLimitExceeded");
}

// The TLS credentials each pod mounts: the PS its role's pair, a trainer the trainers'. A job an
// older operator started (its Service without the per-role annotation, its Secret with one shared
// pair) keeps that pair for the pods made while it runs, so that a replaced worker finds its PS.
TEST_F(Operator, EachPodMountsItsRolesCredentialsAndAnOlderJobsPodsKeepTheSharedOnes) {
  submit("j", ps_spec("ExitCode", 3));
  ASSERT_TRUE(cifar::testing::wait_for([&] { return pod_names("j") == kPsJobPods; }, seconds(30)));
  const auto mounted = [&](const std::string& name) {
    const auto pod = client_.get(cifar::kube::pods(ns_).named(name));
    for (const auto& volume : pod["spec"]["volumes"]) {
      if (volume["name"] == "job-tls")
        return volume["secret"]["items"][1]["key"].get<std::string>();
    }
    return std::string("none");
  };
  EXPECT_EQ(mounted("j-ps-0"), "ps.crt");
  EXPECT_EQ(mounted("j-worker-0"), "trainer.crt");
  EXPECT_EQ(mounted("j-evaluator-0"), "none");
  const auto secret = client_.get(cifar::kube::secrets(ns_).named("j-token"))["data"];
  for (const auto* key : {"ca.crt", "ps.crt", "ps.key", "trainer.crt", "trainer.key", "token"}) {
    EXPECT_TRUE(secret.contains(key)) << key;
  }
  EXPECT_FALSE(secret.contains("tls.crt"));

  client_.patch(cifar::kube::services(ns_).named("j"),
                {{"metadata", {{"annotations", {{"cifartrain.io/ps-credentials", nullptr}}}}}},
                PatchType::kMerge);
  const auto first = client_.get(cifar::kube::pods(ns_).named("j-worker-0"))["metadata"]["uid"];
  set_phase("j-worker-0", "Failed", 137);  // killed: retryable, recreated
  ASSERT_TRUE(cifar::testing::wait_for(
      [&] {
        try {
          return client_.get(cifar::kube::pods(ns_).named("j-worker-0"))["metadata"]["uid"] !=
                 first;
        } catch (const cifar::kube::ApiError&) {
          return false;
        }
      },
      seconds(30)))
      << log();
  EXPECT_EQ(mounted("j-worker-0"), "tls.crt");
}

TEST_F(Operator, APermanentExitCodeFailsTheJob) {
  submit("j", ps_spec("ExitCode", 3));
  ASSERT_TRUE(cifar::testing::wait_for([&] { return pod_names("j") == kPsJobPods; }, seconds(30)));
  set_phase("j-ps-0", "Failed", 1);
  EXPECT_TRUE(wait_for_state("j", "Failed")) << job_status("j").dump();
  const auto message = job_status("j")["conditions"].back()["message"].get<std::string>();
  EXPECT_NE(message.find("j-ps-0 failed with exit code 1"), std::string::npos) << message;
}

TEST_F(Operator, AnInvalidSpecIsReportedAndNothingIsCreated) {
  auto spec = ps_spec();
  spec["strategy"] = {{"type", "AllReduce"}, {"allReduce", {{"backend", "nccl"}}}};
  spec["replicaSpecs"].erase("PS");
  submit("bad", spec);
  EXPECT_TRUE(wait_for_state("bad", "Failed")) << log();
  const auto condition = job_status("bad")["conditions"].back();
  EXPECT_EQ(condition["reason"], "InvalidSpec");
  EXPECT_NE(condition["message"].get<std::string>().find("spec.strategy.allReduce.backend"),
            std::string::npos);
  EXPECT_TRUE(pods_of("bad").empty());
}

// A finished job's spec edited into one the operator would refuse (the CRD cannot tell that nccl
// needs GPUs): the API server refuses the edit itself (the spec is immutable but for runPolicy),
// the job stays as it ended, and its TTL still deletes it.
TEST_F(Operator, AFinishedJobsSpecCannotBeEditedItStaysAsItEndedAndIsStillCleanedUp) {
  auto spec = json::parse(R"({"image": "cifar-train:test", "model": {"name": "resnet20"},
    "dataset": {"name": "synthetic"}, "strategy": {"type": "AllReduce"},
    "replicaSpecs": {"Worker": {"replicas": 2}},
    "runPolicy": {"ttlSecondsAfterFinished": 8}})");
  submit("ar", spec);
  const std::set<std::string> pods = {"ar-worker-0", "ar-worker-1"};
  ASSERT_TRUE(cifar::testing::wait_for([&] { return pod_names("ar") == pods; }, seconds(30)));
  for (const auto& name : pods) set_phase(name, "Running");
  set_phase("ar-worker-0", "Succeeded");
  ASSERT_TRUE(wait_for_state("ar", "Succeeded")) << job_status("ar").dump() << log();
  try {
    client_.patch(cifar::testing::cifartrainjobs(ns_).named("ar"),
                  {{"spec", {{"strategy", {{"allReduce", {{"backend", "nccl"}}}}}}}},
                  PatchType::kMerge);
    ADD_FAILURE() << "the edit of spec.strategy was accepted";
  } catch (const cifar::kube::ApiError& e) {
    EXPECT_EQ(e.status(), 422);
    EXPECT_NE(std::string(e.what()).find("spec.strategy cannot change"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(job_status("ar")["state"], "Succeeded") << job_status("ar").dump();
  EXPECT_EQ(job_status("ar")["reason"], "JobSucceeded");
  EXPECT_TRUE(cifar::testing::wait_for(
      [&] {
        try {
          client_.get(cifar::testing::cifartrainjobs(ns_).named("ar"));
          return false;
        } catch (const cifar::kube::ApiError& e) {
          return e.status() == 404;
        }
      },
      seconds(30)))
      << log();
}

TEST_F(Operator, AnObjectTheServerRefusesFailsTheJobWithItsMessageInsteadOfRetrying) {
  // The CRD cannot check a template's contents: this label key makes every pod invalid (422).
  auto spec = ps_spec();
  spec["replicaSpecs"]["Worker"]["template"] = {{"metadata", {{"labels", {{"bad key!", "x"}}}}}};
  submit("refused", spec);
  EXPECT_TRUE(wait_for_state("refused", "Failed")) << log();
  const auto condition = job_status("refused")["conditions"].back();
  EXPECT_EQ(condition["reason"], "CreateRejected");
  const auto message = condition["message"].get<std::string>();
  EXPECT_NE(message.find("bad key!"), std::string::npos) << message;  // the server's own words
  // A Warning Event says the same, once (posted after the status: a cold CI run read the events
  // in between and found none).
  json events;
  EXPECT_TRUE(cifar::testing::wait_for(
      [&] {
        events = client_.list(cifar::kube::events(ns_),
                              {"", "involvedObject.name=refused,reason=CreateRejected", ""});
        return !events["items"].empty();
      },
      seconds(10)));
  ASSERT_EQ(events["items"].size(), 1U) << events.dump();
  EXPECT_EQ(events["items"][0]["type"], "Warning");
  // No hot loop: the operator stops trying (no worker pod ever appears, no second event).
  std::this_thread::sleep_for(std::chrono::seconds(2));
  for (const auto& name : pod_names("refused")) EXPECT_EQ(name.find("worker"), std::string::npos);
  EXPECT_EQ(client_
                .list(cifar::kube::events(ns_),
                      {"", "involvedObject.name=refused,reason=CreateRejected", ""})["items"]
                .size(),
            1U);
}

// Pod Security Admission enforcing `restricted` in the job's namespace (the API server's, as on a
// shared cluster): every pod the operator makes is admitted, and a template that asks for what
// the level forbids ends its job with the server's refusal, which names what was asked.
TEST_F(Operator, InARestrictedNamespaceItsPodsAreAdmittedAndAForbiddenTemplateIsRefusedByName) {
  client_.patch({"", "v1", "namespaces", "", ns_, ""},
                {{"metadata", {{"labels", cifar::testing::kRestricted}}}},
                cifar::kube::PatchType::kMerge);
  submit("j", ps_spec());
  ASSERT_TRUE(cifar::testing::wait_for([&] { return pod_names("j") == kPsJobPods; }, seconds(30)))
      << log();

  const std::map<std::string, std::pair<json, std::string>> forbidden = {
      {"privileged",
       {{{"spec",
          {{"initContainers", json::array({{{"name", "setup"},
                                            {"image", "cifar-train:test"},
                                            {"securityContext", {{"privileged", true}}}}})}}}},
        "securityContext.privileged=true"}},
      {"host-path",
       {{{"spec",
          {{"volumes", json::array({{{"name", "host"}, {"hostPath", {{"path", "/var/run"}}}}})}}}},
        "hostPath"}},
      {"root", {{{"spec", {{"securityContext", {{"runAsUser", 0}}}}}}, "runAsUser=0"}}};
  for (const auto& [name, asked] : forbidden) {
    auto spec = ps_spec();
    spec["replicaSpecs"]["Worker"]["template"] = asked.first;
    submit(name, spec);
  }
  for (const auto& [name, asked] : forbidden) {
    EXPECT_TRUE(wait_for_state(name, "Failed")) << name << "\n" << log();
    const auto condition = job_status(name)["conditions"].back();
    EXPECT_EQ(condition["reason"], "CreateRejected") << name;
    const auto message = condition.value("message", "");
    EXPECT_NE(message.find("violates PodSecurity \"restricted"), std::string::npos) << message;
    EXPECT_NE(message.find(asked.second), std::string::npos) << asked.second << ": " << message;
  }
}

TEST_F(Operator, KilledAndRestartedMidReconcileItCreatesNoDuplicatesAndLosesNothing) {
  for (int i = 0; i < 3; ++i) submit("k" + std::to_string(i), ps_spec());
  std::this_thread::sleep_for(std::chrono::milliseconds(150));  // some pods created, not all
  operator_->kill_hard();
  start_operator();
  for (int i = 0; i < 3; ++i) {
    const auto job = "k" + std::to_string(i);
    std::set<std::string> expected;
    for (const auto& name : kPsJobPods) expected.insert(job + name.substr(1));
    EXPECT_TRUE(cifar::testing::wait_for([&] { return pod_names(job) == expected; }, seconds(30)))
        << job << log();
    EXPECT_EQ(pods_of(job).size(), expected.size()) << job;
  }
}

TEST_F(Operator, OfTwoInstancesOneLeadsAndTheOtherTakesOverWhenItDies) {
  const auto first_leader = lease()["holderIdentity"].get<std::string>();
  const int second_log = starts_;
  auto second = launch_operator();  // ready as a standby
  EXPECT_EQ(lease()["holderIdentity"], first_leader);
  EXPECT_NE(cifar::testing::read_file(log_path(second_log)).find("standing by"), std::string::npos)
      << log();

  submit("j", ps_spec());
  ASSERT_TRUE(cifar::testing::wait_for([&] { return pod_names("j") == kPsJobPods; }, seconds(30)))
      << log();
  // Only the leader acted.
  EXPECT_EQ(cifar::testing::read_file(log_path(second_log)).find("created pod"), std::string::npos)
      << log();

  operator_->kill_hard();  // no release: the standby waits out the lease duration
  ASSERT_TRUE(cifar::testing::wait_for(
      [&] {
        const auto holder = lease().value("holderIdentity", "");
        return !holder.empty() && holder != first_leader;
      },
      seconds(30)))
      << lease().dump() << log();
  EXPECT_EQ(lease()["leaseTransitions"], 1);
  submit("k", ps_spec());
  std::set<std::string> expected;
  for (const auto& name : kPsJobPods) expected.insert("k" + name.substr(1));
  EXPECT_TRUE(cifar::testing::wait_for([&] { return pod_names("k") == expected; }, seconds(30)))
      << log();
  EXPECT_NE(cifar::testing::read_file(log_path(second_log)).find("created pod k-master-0"),
            std::string::npos)
      << log();

  // A graceful stop hands the lease back at once.
  second->send(SIGTERM);
  EXPECT_EQ(second->wait(), 0) << log();
  EXPECT_EQ(lease()["holderIdentity"], "") << lease().dump();
}

TEST_F(Operator, ProgressIsReadFromTheMastersMetricsEndpoint) {
  // A real cifar-train plays the master's container, its metrics on a loopback address of this
  // test's own (all of 127/8 is loopback) at the pod port 9464.
  const auto pid = static_cast<unsigned>(::getpid());
  const auto ip = "127.4." + std::to_string(pid / 250 % 250) + "." + std::to_string(1 + pid % 250);
  TempDir model_dir;
  ChildProcess trainer({CIFAR_TRAIN_BIN,
                        "-m",
                        "simplecnn",
                        "-d",
                        "synthetic",
                        "--synthetic-train-size",
                        "640",
                        "--synthetic-test-size",
                        "64",
                        "-e",
                        "1000",
                        "-b",
                        "32",
                        "-t",
                        "1",
                        "--workers",
                        "0",
                        "--model-dir",
                        model_dir.path().string(),
                        "--metrics-bind",
                        ip,
                        "--metrics-port",
                        "9464",
                        "--progress",
                        "none"},
                       dir_.path() / "trainer.log");
  submit("j", ps_spec());
  ASSERT_TRUE(cifar::testing::wait_for([&] { return pod_names("j") == kPsJobPods; }, seconds(30)));
  for (const auto& name : kPsJobPods) set_phase(name, "Running");
  set_pod_ip("j-master-0", ip);
  const auto progress = [&] { return job_status("j").value("progress", json::object()); };
  ASSERT_TRUE(cifar::testing::wait_for(
      [&] {
        return progress().value("step", 0) > 0 && progress().value("imagesPerSecond", 0.0) > 0;
      },
      seconds(60)))
      << job_status("j").dump() << log() << cifar::testing::read_file(dir_.path() / "trainer.log");
  const auto first = progress();
  EXPECT_GE(first.value("epoch", 0), 1);
  EXPECT_TRUE(first.contains("loss"));
  EXPECT_TRUE(first.contains("updatedAt"));
  // The job's total: 1000 epochs of 640 / 32 = 20 steps.
  ASSERT_TRUE(first.contains("progressPercentage")) << first.dump();
  EXPECT_EQ(first["progressPercentage"].get<int>(), first["step"].get<int>() * 100 / 20000);
  // It follows the training, and estimates the time to go from the rate since its last write.
  EXPECT_TRUE(cifar::testing::wait_for(
      [&] {
        return progress().value("step", 0) > first["step"].get<int>() &&
               progress().value("estimatedRemainingSeconds", 0) > 0;
      },
      seconds(60)))
      << job_status("j").dump();
  // kubectl shows it in the printer columns.
  const auto table = cifar::testing::run_process(
      {"kubectl", "--kubeconfig", kubeconfig(), "get", "ctj", "j", "-n", ns_});
  ASSERT_EQ(table.exit_code, 0) << table.output;
  EXPECT_NE(table.output.find("IMAGES/S"), std::string::npos) << table.output;
  EXPECT_NE(table.output.find("PROGRESS"), std::string::npos) << table.output;
  EXPECT_NE(table.output.find("ETA"), std::string::npos) << table.output;
  EXPECT_NE(table.output.find("Running"), std::string::npos) << table.output;
}

}  // namespace
