// The objects a CifarTrainJob should consist of. That the runtime reads the pods' arguments and
// env as meant is tests/contract's; here, TF_CONFIG is read back by cluster::parse_tf_config.
#include "cifartrainjob/desired_state.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cluster/cluster.h"
#include "contract/labels.h"
#include "tests/operator/fixtures.h"

namespace cifar::op::desired_state_test {
namespace {

using nlohmann::json;
using testing::env_of;
namespace label = contract::label;

Job make_job(const json& spec) {
  auto full = json::parse(R"({"image": "cifar-train:test", "model": {"name": "resnet20"},
                              "dataset": {"name": "cifar10"}})");
  full.update(spec);
  return Job{"mnist", "team", "uid-1", parse_spec(full), ""};
}

Job ps_job() {
  return make_job(json::parse(R"({
    "strategy": {"type": "ParameterServer", "parameterServer": {"mode": "async"}},
    "replicaSpecs": {"PS": {"replicas": 1}, "Master": {"replicas": 1}, "Worker": {"replicas": 2},
                     "Evaluator": {"replicas": 1}},
    "checkpoint": {"volume": {"claimName": "checkpoints"}}})"));
}

TEST(DesiredState, OneHeadlessServiceWithTheJobsPorts) {
  const auto service = desired_service(ps_job());
  EXPECT_EQ(service["metadata"]["name"], "mnist");
  EXPECT_EQ(service["metadata"]["namespace"], "team");
  EXPECT_EQ(service["spec"]["clusterIP"], "None");
  EXPECT_EQ(service["spec"]["publishNotReadyAddresses"], true);
  EXPECT_EQ(service["spec"]["selector"], json({{label::kJobName, "mnist"}}));
  EXPECT_EQ(service["spec"]["ports"].dump(),
            R"([{"name":"grpc","port":2222},{"name":"c10d","port":29500},)"
            R"({"name":"metrics","port":9464}])");
  EXPECT_EQ(service["metadata"]["ownerReferences"][0]["uid"], "uid-1");
}

TEST(DesiredState, APodPerReplicaWithNamesHostnamesLabelsAndOwner) {
  const auto pods = desired_pods(ps_job());
  std::vector<std::string> names;
  names.reserve(pods.size());
  for (const auto& p : pods) names.push_back(p["metadata"]["name"]);
  EXPECT_EQ(names, (std::vector<std::string>{"mnist-ps-0", "mnist-master-0", "mnist-worker-0",
                                             "mnist-worker-1", "mnist-evaluator-0"}));
  const auto& worker1 = pods[3];
  EXPECT_EQ(worker1["spec"]["hostname"], "mnist-worker-1");
  EXPECT_EQ(worker1["spec"]["subdomain"], "mnist");
  EXPECT_EQ(worker1["metadata"]["labels"], json({{label::kJobName, "mnist"},
                                                 {label::kReplicaType, "worker"},
                                                 {label::kReplicaIndex, "1"}}));
  const auto& owner = worker1["metadata"]["ownerReferences"][0];
  EXPECT_EQ(owner["kind"], "CifarTrainJob");
  EXPECT_EQ(owner["apiVersion"], "cifartrain.io/v1alpha1");
  EXPECT_EQ(owner["controller"], true);
  EXPECT_EQ(worker1["spec"]["restartPolicy"], "OnFailure");
  EXPECT_EQ(env_of(worker1, "CIFAR_JOB_NAME"), "mnist");
  EXPECT_EQ(env_of(worker1, "CIFAR_NAMESPACE"), "team");
  EXPECT_EQ(env_of(worker1, "POD_NAME"), "(ref)");
  EXPECT_EQ(env_of(worker1, "MASTER_ADDR"), "");  // PS jobs: TF_CONFIG only
}

// The role is read back from the labels it was written to; a pod without them is nobody's replica.
TEST(DesiredState, APodsRoleIsReadFromItsLabels) {
  const auto pods = desired_pods(ps_job());
  EXPECT_EQ(pod_role(pods[0]), Role::kPs);
  EXPECT_EQ(pod_role(pods[3]), Role::kWorker);
  EXPECT_EQ(pod_role(pods[4]), Role::kEvaluator);
  EXPECT_EQ(pod_role(json{{"metadata", {{"name", "a-users-pod"}}}}), std::nullopt);
  EXPECT_EQ(pod_role(json{{"metadata", {{"labels", {{label::kReplicaType, "chef"}}}}}}),
            std::nullopt);
}

TEST(DesiredState, TheExactTfConfig) {
  EXPECT_EQ(
      tf_config(ps_job(), Role::kWorker, 1),
      R"({"cluster":{"evaluator":["mnist-evaluator-0.mnist.team.svc:2222"],)"
      R"("master":["mnist-master-0.mnist.team.svc:2222"],)"
      R"("ps":["mnist-ps-0.mnist.team.svc:2222"],)"
      R"("worker":["mnist-worker-0.mnist.team.svc:2222","mnist-worker-1.mnist.team.svc:2222"]},)"
      R"("task":{"index":1,"type":"worker"}})");
}

TEST(DesiredState, TheRuntimeReadsEveryPodsTfConfigAsThatPodsTask) {
  const auto job = ps_job();
  for (const auto& pod : desired_pods(job)) {
    const auto parsed = cluster::parse_tf_config(env_of(pod, "TF_CONFIG"));
    EXPECT_EQ(cluster::role_name(parsed.role), pod["metadata"]["labels"][label::kReplicaType]);
    EXPECT_EQ(std::to_string(parsed.index), pod["metadata"]["labels"][label::kReplicaIndex]);
    EXPECT_EQ(parsed.cluster.worker.size(), 2U);
    EXPECT_EQ(parsed.cluster.ps.at(0), "mnist-ps-0.mnist.team.svc:2222");
  }
}

TEST(DesiredState, GpusAndSchedulingReachThePod) {
  auto job = make_job(json::parse(R"({
    "strategy": {"type": "AllReduce", "allReduce": {"backend": "nccl"}},
    "replicaSpecs": {"Master": {"replicas": 1, "resources": {"limits": {"nvidia.com/gpu": 1}}},
                     "Worker": {"replicas": 1, "resources": {"limits": {"nvidia.com/gpu": 1}}}},
    "runPolicy": {"restartPolicy": "Never",
                  "schedulingPolicy": {"schedulerName": "volcano", "priorityClass": "high"}}})"));
  const auto pod = desired_pod(job, Role::kWorker, 0);
  EXPECT_EQ(env_of(pod, "RANK"), "1");  // after the master
  EXPECT_EQ(env_of(pod, "MASTER_ADDR"), "mnist-master-0.mnist.team.svc");
  EXPECT_EQ(pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"], 1);
  EXPECT_EQ(pod["spec"]["schedulerName"], "volcano");
  EXPECT_EQ(pod["spec"]["priorityClassName"], "high");
  EXPECT_EQ(pod["spec"]["restartPolicy"], "Never");
  const auto args = pod["spec"]["containers"][0]["args"].get<std::vector<std::string>>();
  const auto cuda = std::find(args.begin(), args.end(), "-c");
  ASSERT_NE(cuda, args.end());
  EXPECT_EQ(*(cuda + 1), "cuda");
  // It tolerates GPU nodes' taint.
  EXPECT_EQ(
      pod["spec"]["tolerations"],
      json::parse(R"([{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}])"));
}

TEST(DesiredState, TrainingDeviceAutoIsCudaExactlyForTheReplicasGivenGpus) {
  auto spec = json::parse(R"({
    "strategy": {"type": "ParameterServer"},
    "replicaSpecs": {"PS": {"replicas": 1},
                     "Worker": {"replicas": 2, "resources": {"limits": {"nvidia.com/gpu": 1}}}}})");
  const auto device = [&](const char* name, Role role) {
    spec["training"]["device"] = name;
    const auto job = make_job(spec);
    const auto args = desired_pod(job, role, 0)["spec"]["containers"][0]["args"];
    const auto flag = std::find(args.begin(), args.end(), "-c");
    return flag == args.end() ? std::string("(none)") : (flag + 1)->get<std::string>();
  };
  EXPECT_EQ(device("auto", Role::kWorker), "cuda");
  EXPECT_EQ(device("auto", Role::kPs), "cpu");
  EXPECT_EQ(device("cpu", Role::kWorker), "cpu");  // GPUs held, not used (fake GPU nodes)
  EXPECT_EQ(device("cuda", Role::kPs), "cuda");    // a runtime that injects GPUs by itself
}

TEST(DesiredState, OnlyGpuPodsTolerateTheGpuTaintAndATemplatesOwnTolerationStays) {
  const auto job = make_job(json::parse(R"({
    "strategy": {"type": "ParameterServer"},
    "replicaSpecs": {"PS": {"replicas": 1},
                     "Worker": {"replicas": 1, "resources": {"limits": {"nvidia.com/gpu": 2}},
                                "template": {"spec": {"tolerations": [
                                  {"key": "nvidia.com/gpu", "operator": "Equal", "value": "a100",
                                   "effect": "NoSchedule"},
                                  {"key": "spot", "operator": "Exists"}]}}}}})"));
  EXPECT_FALSE(desired_pod(job, Role::kPs, 0)["spec"].contains("tolerations"));
  const auto tolerations = desired_pod(job, Role::kWorker, 0)["spec"]["tolerations"];
  ASSERT_EQ(tolerations.size(), 2U) << tolerations;  // the template's say which GPU nodes
  EXPECT_EQ(tolerations[0]["value"], "a100");
}

TEST(DesiredState, ATemplateAddsToThePodButCannotChangeItsIdentity) {
  auto job = make_job(json::parse(R"({
    "strategy": {"type": "AllReduce"},
    "replicaSpecs": {"Worker": {"replicas": 1, "template": {
      "metadata": {"labels": {"team": "vision", "cifartrain.io/job-name": "other"}},
      "spec": {"nodeSelector": {"pool": "gpu"}, "hostname": "x", "volumes": [{"name": "extra", "emptyDir": {}}]}}}}})"));
  const auto pod = desired_pod(job, Role::kWorker, 0);
  EXPECT_EQ(pod["metadata"]["labels"]["team"], "vision");
  EXPECT_EQ(pod["metadata"]["labels"][label::kJobName], "mnist");
  EXPECT_EQ(pod["spec"]["nodeSelector"]["pool"], "gpu");
  EXPECT_EQ(pod["spec"]["hostname"], "mnist-worker-0");
  std::vector<std::string> volumes;
  for (const auto& v : pod["spec"]["volumes"]) volumes.push_back(v["name"]);
  EXPECT_EQ(volumes, (std::vector<std::string>{"extra", "checkpoints", "data", "tmp"}));
}

// A job's suspect nodes (cifartrainjob/stall.h) are kept off whatever the template's own node
// affinity says: its terms are ORed, so each gets the NotIn.
TEST(DesiredState, SuspectNodesAreAvoidedInEveryNodeAffinityTermOfTheTemplate) {
  auto job = make_job(json::parse(R"({
    "strategy": {"type": "AllReduce"},
    "replicaSpecs": {"Worker": {"replicas": 1, "template": {"spec": {"affinity": {"nodeAffinity": {
      "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a"]}]},
        {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["b"]}]}]}}}}}}}})"));
  auto pod = desired_pod(job, Role::kWorker, 0);
  const auto before = pod;
  avoid_nodes(pod, {});
  EXPECT_EQ(pod, before);
  avoid_nodes(pod, {"n2", "n3"});
  const auto terms = pod["spec"]["affinity"]["nodeAffinity"]
                        ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"];
  ASSERT_EQ(terms.size(), 2U);
  for (const auto& term : terms) {
    ASSERT_EQ(term["matchExpressions"].size(), 2U) << term;
    EXPECT_EQ(term["matchExpressions"][1],
              json::parse(R"({"key": "kubernetes.io/hostname", "operator": "NotIn",
                              "values": ["n2", "n3"]})"));
  }
}

// The token reaches the members of the PS channel alone: a PS job's PS and trainers, not its
// evaluator, nor an all-reduce job's pods.
TEST(DesiredState, ThePsChannelsMembersAloneGetTheJobsTokenFromItsSecret) {
  const auto job = ps_job();
  const auto secret =
      desired_token_secret(job, "s3cret", {{"ca", "ps cert", "ps key"}, {"ca", "cert", "key"}});
  EXPECT_EQ(secret["metadata"]["name"], "mnist-token");
  EXPECT_EQ(secret["metadata"]["namespace"], "team");
  EXPECT_EQ(secret["metadata"]["ownerReferences"][0]["uid"], "uid-1");
  EXPECT_EQ(secret["stringData"]["token"], "s3cret");
  const auto token_of = [](const json& pod) {
    json token;
    for (const auto& e : pod["spec"]["containers"][0]["env"]) {
      if (e["name"] == "CIFAR_PS_TOKEN") token = e;
    }
    return token;
  };
  int members = 0;
  for (const auto& pod : desired_pods(job)) {
    const auto name = pod["metadata"]["name"].get<std::string>();
    if (name == "mnist-evaluator-0") {
      EXPECT_TRUE(token_of(pod).is_null()) << name;
      continue;
    }
    ++members;
    EXPECT_EQ(token_of(pod)["valueFrom"]["secretKeyRef"],
              json({{"name", "mnist-token"}, {"key", "token"}}))
        << name;
  }
  EXPECT_EQ(members, 4);  // the PS, the master, two workers
  const auto all_reduce = make_job(json::parse(
      R"({"strategy": {"type": "AllReduce"}, "replicaSpecs": {"Worker": {"replicas": 2}}})"));
  for (const auto& pod : desired_pods(all_reduce)) {
    EXPECT_TRUE(token_of(pod).is_null()) << pod["metadata"]["name"];
  }
}

// The job's TLS credentials live in its Secret beside the token, one certificate and key per role
// (the CA's key nowhere); a PS job's PS mounts the PS's and its trainers the trainers', under the
// names the runtime reads, and are told where; the PS's certificate names every pod as TF_CONFIG
// does. The evaluator, which calls no PS, and an all-reduce job's pods get none.
TEST(DesiredState, APsJobsPsAndTrainersEachMountTheirRolesCredentialsFromItsSecret) {
  const auto job = ps_job();
  const auto secret = desired_token_secret(
      job, "s3cret", {{"the CA", "the PS cert", "the PS key"}, {"the CA", "the cert", "the key"}});
  EXPECT_EQ(secret["stringData"], json({{"token", "s3cret"},
                                        {"ca.crt", "the CA"},
                                        {"ps.crt", "the PS cert"},
                                        {"ps.key", "the PS key"},
                                        {"trainer.crt", "the cert"},
                                        {"trainer.key", "the key"}}));
  const auto request = job_certificate_request(job);
  EXPECT_EQ(request.dns_names,
            (std::vector<std::string>{"*.mnist.team.svc", "*.mnist.team.svc.cluster.local"}));
  EXPECT_EQ(pod_host(job, Role::kPs, 0), "mnist-ps-0.mnist.team.svc");  // under the wildcard
  EXPECT_TRUE(has_per_role_credentials(desired_service(job)));
  for (const auto& pod : desired_pods(job)) {
    const std::string name = pod["metadata"]["name"];
    const bool member = name.find("evaluator") == std::string::npos;
    EXPECT_EQ(env_of(pod, "CIFAR_TLS_DIR"), member ? "/etc/cifartrain/tls" : "") << name;
    const auto& volumes = pod["spec"]["volumes"];
    const auto tls = std::find_if(volumes.begin(), volumes.end(),
                                  [](const json& v) { return v["name"] == "job-tls"; });
    ASSERT_EQ(tls != volumes.end(), member) << name;
    if (!member) continue;
    EXPECT_EQ((*tls)["secret"]["secretName"], "mnist-token");
    EXPECT_EQ((*tls)["secret"]["defaultMode"], 0444);
    const std::string own = name == "mnist-ps-0" ? "ps" : "trainer";
    EXPECT_EQ((*tls)["secret"]["items"], json::parse(R"([{"key": "ca.crt", "path": "ca.crt"},
                              {"key": ")" + own + R"(.crt", "path": "tls.crt"},
                              {"key": ")" + own + R"(.key", "path": "tls.key"}])"))
        << name;
    EXPECT_EQ(
        pod["spec"]["containers"][0]["volumeMounts"].back(),
        json({{"name", "job-tls"}, {"mountPath", "/etc/cifartrain/tls"}, {"readOnly", true}}));
  }
  auto allreduce = make_job(json::parse(R"({"strategy": {"type": "AllReduce"},
    "replicaSpecs": {"Worker": {"replicas": 2}}})"));
  for (const auto& pod : desired_pods(allreduce)) EXPECT_EQ(env_of(pod, "CIFAR_TLS_DIR"), "");
}

// A job an older operator started (its Service without the annotation) has a Secret with one
// certificate for all: the pods it still creates mount that one, so that they find their peers.
TEST(DesiredState, AJobWhoseSecretHasOneCertificateForAllKeepsMountingIt) {
  auto job = ps_job();
  auto older_service = desired_service(job);
  older_service["metadata"]["annotations"].erase(kPerRoleCredentialsAnnotation);
  ASSERT_FALSE(has_per_role_credentials(older_service));
  job.shared_credentials = true;
  for (const auto& pod : desired_pods(job)) {
    for (const auto& volume : pod["spec"]["volumes"]) {
      if (volume["name"] != "job-tls") continue;
      EXPECT_EQ(volume["secret"]["items"], json::parse(R"([{"key": "ca.crt", "path": "ca.crt"},
                                                          {"key": "tls.crt", "path": "tls.crt"},
                                                          {"key": "tls.key", "path": "tls.key"}])"))
          << pod["metadata"]["name"];
    }
  }
}

// The value after `flag` in `args`, or nullopt without it.
std::optional<std::string> flag_value(const std::vector<std::string>& args, std::string_view flag) {
  const auto at = std::find(args.begin(), args.end(), flag);
  if (at == args.end() || at + 1 == args.end()) return std::nullopt;
  return *(at + 1);
}

// runPolicy.stallTimeoutSeconds is the trainers' --stall-seconds (0, off, is the runtime's -1);
// absent, they derive their own. The PS and the evaluator wait by design: never a limit.
TEST(DesiredState, TheStallTimeoutIsTheTrainersStallLimit) {
  auto spec = json::parse(R"({"strategy": {"type": "ParameterServer"},
    "replicaSpecs": {"PS": {"replicas": 1}, "Master": {"replicas": 1}, "Worker": {"replicas": 1},
                     "Evaluator": {"replicas": 1}},
    "checkpoint": {"volume": {"claimName": "checkpoints"}}})");
  EXPECT_EQ(flag_value(container_args(make_job(spec), Role::kWorker), "--stall-seconds"),
            std::nullopt);
  for (const auto& [given, written] : {std::pair{120, "120"}, std::pair{0, "-1"}}) {
    spec["runPolicy"] = {{"stallTimeoutSeconds", given}};
    const auto job = make_job(spec);
    EXPECT_EQ(flag_value(container_args(job, Role::kMaster), "--stall-seconds"), written);
    EXPECT_EQ(flag_value(container_args(job, Role::kWorker), "--stall-seconds"), written);
    EXPECT_EQ(flag_value(container_args(job, Role::kPs), "--stall-seconds"), std::nullopt);
    EXPECT_EQ(flag_value(container_args(job, Role::kEvaluator), "--stall-seconds"), std::nullopt);
  }
  // runPolicy.stallStartupSeconds: the trainers' floor until their first step.
  EXPECT_EQ(flag_value(container_args(make_job(spec), Role::kWorker), "--stall-startup-seconds"),
            std::nullopt);
  spec["runPolicy"] = {{"stallStartupSeconds", 45}};
  const auto job = make_job(spec);
  EXPECT_EQ(flag_value(container_args(job, Role::kMaster), "--stall-startup-seconds"), "45");
  EXPECT_EQ(flag_value(container_args(job, Role::kWorker), "--stall-startup-seconds"), "45");
  EXPECT_EQ(flag_value(container_args(job, Role::kPs), "--stall-startup-seconds"), std::nullopt);
}

// dataset.uri: the CIFAR files in the checkpoint store. Every pod that reads data (all but the PS,
// which already has the store's keys) gets the keys and --data-uri, and its data in an emptyDir
// bounded by the files' size; no volume of any kind is claimed.
TEST(DesiredState, ADatasetInTheStoreIsFetchedByEveryPodThatReadsDataIntoABoundedEmptyDir) {
  const auto job = make_job(json::parse(R"({
    "dataset": {"name": "cifar10", "uri": "s3://data/cifar10"},
    "strategy": {"type": "ParameterServer"},
    "replicaSpecs": {"PS": {"replicas": 1}, "Master": {"replicas": 1}, "Worker": {"replicas": 2},
                     "Evaluator": {"replicas": 1}},
    "checkpoint": {"uri": "s3://ckpt/runs", "s3": {"endpoint": "http://store:8333",
                   "credentialsSecret": "keys"}}})"));
  for (const auto& pod : desired_pods(job)) {
    const auto name = pod["metadata"]["name"].get<std::string>();
    const bool ps = name == "mnist-ps-0";
    EXPECT_EQ(env_of(pod, "AWS_ENDPOINT_URL"), "http://store:8333") << name;
    const auto args = pod["spec"]["containers"][0]["args"].get<std::vector<std::string>>();
    EXPECT_EQ(flag_value(args, "--data-uri"),
              ps ? std::nullopt : std::optional<std::string>("s3://data/cifar10"))
        << name;
    EXPECT_EQ(flag_value(args, "--data-dir"), "/data") << name;
    for (const auto& volume : pod["spec"]["volumes"]) {
      EXPECT_FALSE(volume.contains("persistentVolumeClaim")) << name << ": " << volume.dump();
      if (volume["name"] == "data") {
        EXPECT_EQ(volume["emptyDir"]["sizeLimit"], "256Mi") << name;
      }
    }
  }
}

// checkpoint.uri: the run is a prefix of the bucket, and only the pods that read or write it get
// the store's keys (from the user's Secret, never as values) and settings; no checkpoint volume.
TEST(DesiredState, WithAnObjectStoreOnlyItsUsersGetItsCredentialsAndNoPodAVolume) {
  auto job = make_job(json::parse(R"({
    "strategy": {"type": "ParameterServer"},
    "replicaSpecs": {"PS": {"replicas": 2}, "Master": {"replicas": 1}, "Worker": {"replicas": 2},
                     "Evaluator": {"replicas": 1}},
    "checkpoint": {"uri": "s3://ckpt/runs/", "s3": {"endpoint": "http://store:8333",
                   "addressing": "Path", "region": "eu-west-1", "credentialsSecret": "keys"}}})"));
  EXPECT_EQ(model_dir(job), "s3://ckpt/runs/team/mnist-uid-1");
  const auto args = container_args(job, Role::kMaster);
  EXPECT_NE(std::find(args.begin(), args.end(), "s3://ckpt/runs/team/mnist-uid-1"), args.end());
  std::set<std::string> with_keys;
  for (const auto& pod : desired_pods(job)) {
    const auto name = pod["metadata"]["name"].get<std::string>();
    for (const auto& volume : pod["spec"]["volumes"]) EXPECT_NE(volume["name"], "checkpoints");
    const auto& env = pod["spec"]["containers"][0]["env"];
    for (const auto& e : env) {
      if (e["name"] != "AWS_ACCESS_KEY_ID" && e["name"] != "AWS_SECRET_ACCESS_KEY") continue;
      EXPECT_EQ(e["valueFrom"]["secretKeyRef"], json({{"name", "keys"}, {"key", e["name"]}}));
      EXPECT_FALSE(e.contains("value"));
      with_keys.insert(name);
    }
    const bool user = with_keys.count(name) != 0;
    EXPECT_EQ(env_of(pod, "AWS_ENDPOINT_URL"), user ? "http://store:8333" : "") << name;
    EXPECT_EQ(env_of(pod, "AWS_REGION"), user ? "eu-west-1" : "") << name;
    EXPECT_EQ(env_of(pod, "CIFAR_S3_ADDRESSING"), user ? "path" : "") << name;
  }
  EXPECT_EQ(with_keys, (std::set<std::string>{"mnist-ps-0", "mnist-ps-1", "mnist-master-0",
                                              "mnist-evaluator-0"}));

  // A store with a private CA: its users mount the ConfigMap's ca.crt and are told where it is.
  job = make_job(json::parse(R"({
    "strategy": {"type": "ParameterServer"},
    "replicaSpecs": {"PS": {"replicas": 1}, "Master": {"replicas": 1}, "Worker": {"replicas": 1}},
    "checkpoint": {"uri": "s3://ckpt", "s3": {"endpoint": "https://store:8443",
                   "credentialsSecret": "keys", "caBundleConfigMap": "store-ca"}}})"));
  for (const auto& pod : desired_pods(job)) {
    const auto name = pod["metadata"]["name"].get<std::string>();
    const bool user = name != "mnist-worker-0";
    EXPECT_EQ(env_of(pod, "AWS_CA_BUNDLE"), user ? "/etc/cifartrain/store-ca/ca.crt" : "") << name;
    const auto& volumes = pod["spec"]["volumes"];
    const auto ca = std::find_if(volumes.begin(), volumes.end(),
                                 [](const json& v) { return v["name"] == "store-ca"; });
    ASSERT_EQ(ca != volumes.end(), user) << name;
    if (!user) continue;
    EXPECT_EQ((*ca)["configMap"]["name"], "store-ca");
    EXPECT_EQ((*ca)["configMap"]["items"], json::parse(R"([{"key": "ca.crt", "path": "ca.crt"}])"));
    const auto& mounts = pod["spec"]["containers"][0]["volumeMounts"];
    EXPECT_NE(std::find(mounts.begin(), mounts.end(),
                        json({{"name", "store-ca"},
                              {"mountPath", "/etc/cifartrain/store-ca"},
                              {"readOnly", true}})),
              mounts.end())
        << mounts.dump();
  }

  // An all-reduce job of workers only: rank 0, worker 0, is the one that writes.
  job = make_job(json::parse(R"({"strategy": {"type": "AllReduce"},
    "replicaSpecs": {"Worker": {"replicas": 3}},
    "checkpoint": {"uri": "s3://ckpt", "resumeFrom": "s3://ckpt/elsewhere/run-7",
                   "s3": {"credentialsSecret": "keys"}}})"));
  EXPECT_EQ(model_dir(job), "s3://ckpt/elsewhere/run-7");
  for (const auto& pod : desired_pods(job)) {
    const bool rank0 = pod["metadata"]["name"] == "mnist-worker-0";
    EXPECT_EQ(env_of(pod, "AWS_ACCESS_KEY_ID"), rank0 ? "(ref)" : "") << pod["metadata"]["name"];
    EXPECT_EQ(env_of(pod, "AWS_ENDPOINT_URL"), "");  // AWS's own: none given
  }
}

TEST(DesiredState, PodsRunRestrictedAndReportReadiness) {
  const auto pod = desired_pod(ps_job(), Role::kPs, 0);
  const auto& security = pod["spec"]["securityContext"];
  EXPECT_EQ(security["runAsNonRoot"], true);
  EXPECT_EQ(security["runAsUser"], kRuntimeUser);
  EXPECT_EQ(security["seccompProfile"]["type"], "RuntimeDefault");
  EXPECT_EQ(pod["spec"]["automountServiceAccountToken"], false);  // pods never call the API
  const auto& container = pod["spec"]["containers"][0];
  EXPECT_EQ(container["securityContext"]["allowPrivilegeEscalation"], false);
  EXPECT_EQ(container["securityContext"]["readOnlyRootFilesystem"], true);
  EXPECT_EQ(container["securityContext"]["capabilities"]["drop"], json::array({"ALL"}));
  EXPECT_EQ(container["readinessProbe"]["tcpSocket"]["port"], "metrics");
  // A read-only root: /tmp is a volume.
  bool tmp_mounted = false;
  for (const auto& m : container["volumeMounts"]) tmp_mounted |= m["mountPath"] == "/tmp";
  EXPECT_TRUE(tmp_mounted);
  // A template's own pod security context is kept (e.g. another non-root user).
  auto job = make_job(json::parse(R"({"strategy": {"type": "AllReduce"},
    "replicaSpecs": {"Worker": {"replicas": 1, "template": {"spec": {"securityContext": {"runAsUser": 1000}}}}}})"));
  EXPECT_EQ(desired_pod(job, Role::kWorker, 0)["spec"]["securityContext"],
            json({{"runAsUser", 1000}}));
}

TEST(DesiredState, TheNetworkPolicyAdmitsTheJobsPodsAndScrapesOfMetrics) {
  const auto policy = desired_network_policy(ps_job());
  EXPECT_EQ(policy["metadata"]["name"], "mnist");
  EXPECT_EQ(policy["metadata"]["ownerReferences"][0]["uid"], "uid-1");
  const json job_pods = {{"matchLabels", {{label::kJobName, "mnist"}}}};
  EXPECT_EQ(policy["spec"]["podSelector"], job_pods);
  EXPECT_EQ(policy["spec"]["policyTypes"], json::array({"Ingress", "Egress"}));
  const auto& ingress = policy["spec"]["ingress"];
  ASSERT_EQ(ingress.size(), 2U);
  // From the job's own pods: every port (gRPC, c10d store, Gloo's ephemeral pair ports).
  EXPECT_EQ(ingress[0], json({{"from", json::array({{{"podSelector", job_pods}}})}}));
  // From anywhere: the metrics port only.
  EXPECT_EQ(ingress[1], json({{"ports", json::array({{{"protocol", "TCP"}, {"port", 9464}}})}}));
  // To the job's own pods and DNS, nothing else (no store, no download).
  const json dns = {{"ports", json::array({{{"protocol", "UDP"}, {"port", 53}},
                                           {{"protocol", "TCP"}, {"port", 53}}})}};
  EXPECT_EQ(policy["spec"]["egress"],
            json::array({{{"to", json::array({{{"podSelector", job_pods}}})}}, dns}));
}

// A job in a namespace that denies all traffic by default still reaches its store and its
// dataset's mirror: their ports, as their URLs say.
TEST(DesiredState, TheNetworkPolicyLetsThePodsReachTheStoreAndTheMirror) {
  const auto egress_ports = [](const json& spec) {
    const auto policy = desired_network_policy(make_job(spec));
    std::vector<int> ports;
    for (const auto& rule : policy["spec"]["egress"]) {
      if (rule.contains("to")) continue;
      for (const auto& port : rule["ports"]) {
        if (port["protocol"] == "TCP") ports.push_back(port["port"].get<int>());
      }
    }
    return ports;
  };
  const auto store = [](const std::string& endpoint) {
    return json::parse(R"({"strategy": {"type": "AllReduce"}, "replicaSpecs": {"Worker":
      {"replicas": 2}}, "checkpoint": {"uri": "s3://ckpt", "s3": {"endpoint": ")" +
                       endpoint + R"(", "credentialsSecret": "keys"}}})");
  };
  EXPECT_EQ(egress_ports(store("http://store:8333")), std::vector<int>({53, 8333}));
  EXPECT_EQ(egress_ports(store("https://store.example.com")), std::vector<int>({53, 443}));
  EXPECT_EQ(egress_ports(store("http://10.0.0.1/path")), std::vector<int>({53, 80}));
  EXPECT_EQ(egress_ports(store("https://[fd00::1]:9000/")), std::vector<int>({53, 9000}));
  auto downloads = json::parse(R"({"strategy": {"type": "AllReduce"},
    "replicaSpecs": {"Worker": {"replicas": 1}},
    "dataset": {"name": "cifar10", "download": {"mirror": "http://mirror.local:8080/cifar"}}})");
  EXPECT_EQ(egress_ports(downloads), std::vector<int>({53, 8080}));
  EXPECT_EQ(url_port("https://[fd00::1]/"), 443);
  EXPECT_EQ(url_port(""), 443);  // no endpoint: the provider's default, over https
}

}  // namespace
}  // namespace cifar::op::desired_state_test
