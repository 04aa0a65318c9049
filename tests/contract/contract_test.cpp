// The runtime–operator contract (contract/), checked from both sides with the real code of each:
// the pods the operator would create are parsed by cifar-train's own command line and cluster
// parsers, and the metrics cifar-train serves are read by the operator's progress code. The pods'
// labels are checked against the monitoring that selects by them.
#include <gtest/gtest.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "cifartrainjob/desired_state.h"
#include "cifartrainjob/progress.h"
#include "cli/options.h"
#include "cluster/cluster.h"
#include "cluster/ranks.h"
#include "contract/enum_names.h"
#include "contract/env.h"
#include "contract/exit_codes.h"
#include "contract/flags.h"
#include "contract/labels.h"
#include "contract/metrics.h"
#include "contract/ports.h"
#include "contract/roles.h"
#include "metrics/runtime_metrics.h"

namespace cifar {
namespace {

using nlohmann::json;
using op::Job;

Job make_job(const std::string& spec_json) {
  auto spec = json::parse(R"({"image": "cifar-train:test", "model": {"name": "resnet20"},
                              "dataset": {"name": "cifar10"}})");
  spec.update(json::parse(spec_json));
  if (!spec.contains("checkpoint")) spec["checkpoint"] = {{"volume", {{"claimName", "ckpt"}}}};
  return Job{"mnist", "team", "uid-1", op::parse_spec(spec), ""};
}

// Every optional branch of the arguments the operator writes, between these two jobs.
Job ps_job_with_everything() {
  return make_job(R"({
    "model": {"name": "resnet20", "numClasses": 10},
    "dataset": {"name": "cifar10", "download": {"mirror": "https://mirror.example/cifar"}},
    "training": {"epochs": 7, "batchSize": 32, "optimizer": {"name": "sgd", "momentum": 0.8,
                 "nesterov": false}, "learningRate": {"base": 0.02, "schedule": "step",
                 "warmupEpochs": 1.5}, "weightDecay": 0.0001, "labelSmoothing": 0.1, "seed": 9,
                 "precision": "bf16"},
    "strategy": {"type": "ParameterServer", "parameterServer": {"mode": "ssp", "staleness": 3}},
    "replicaSpecs": {"PS": {"replicas": 2}, "Master": {"replicas": 1}, "Worker": {"replicas": 2},
                     "Evaluator": {"replicas": 1}},
    "checkpoint": {"everySteps": 50, "keep": 5, "maxUnsavedSeconds": 90,
                   "volume": {"claimName": "ckpt"}},
    "runPolicy": {"stallTimeoutSeconds": 240, "stallStartupSeconds": 90}})");
}

Job allreduce_job_on_gpus() {
  return make_job(R"({
    "strategy": {"type": "AllReduce", "allReduce": {"backend": "nccl", "bucketCapMB": 10,
                 "overlap": false, "timeoutSeconds": 20}},
    "replicaSpecs": {"Worker": {"replicas": 3, "resources": {"limits": {"nvidia.com/gpu": 1}}}}})");
}

// Data and checkpoints in object storage: no volume at all.
Job job_without_volumes() {
  return make_job(R"({
    "dataset": {"name": "cifar10", "uri": "s3://data/cifar10"},
    "strategy": {"type": "AllReduce"},
    "replicaSpecs": {"Worker": {"replicas": 2}},
    "checkpoint": {"uri": "s3://ckpt/runs", "s3": {"endpoint": "http://store:8333",
                   "credentialsSecret": "keys"}}})");
}

// An elastic job: workers from 2 to 4, 3 wanted now.
Job elastic_job() {
  return make_job(R"({
    "strategy": {"type": "AllReduce"},
    "replicaSpecs": {"Worker": {"replicas": 3, "minReplicas": 2, "maxReplicas": 4}},
    "checkpoint": {"volume": {"claimName": "ckpt"}}})");
}

Job elastic_ps_job() {
  return make_job(R"({
    "strategy": {"type": "ParameterServer", "parameterServer": {"mode": "sync"}},
    "replicaSpecs": {"PS": {"replicas": 1}, "Master": {"replicas": 1},
                     "Worker": {"replicas": 2, "minReplicas": 1, "maxReplicas": 3}}})");
}

std::vector<std::string> args_of(const json& pod) {
  return pod["spec"]["containers"][0]["args"].get<std::vector<std::string>>();
}

// cifar-train's command-line parser on the pod's arguments, with the pod's literal env set, as
// its container would run.
cli::ParsedCommandLine parse_as_the_container(const json& pod) {
  const auto& container = pod["spec"]["containers"][0];
  std::vector<std::string> names;
  for (const auto& e : container["env"]) {
    if (!e.contains("value")) continue;
    names.push_back(e["name"]);
    setenv(names.back().c_str(), e["value"].get<std::string>().c_str(), 1);
  }
  std::vector<std::string> args = {"cifar-train"};
  for (const auto& a : container["args"]) args.push_back(a);
  std::vector<const char*> argv;
  argv.reserve(args.size());
  for (const auto& a : args) argv.push_back(a.c_str());
  auto parsed = cli::parse_command_line(static_cast<int>(argv.size()), argv.data());
  for (const auto& name : names) unsetenv(name.c_str());
  return parsed;
}

TEST(Contract, EveryFlagOfTheContractIsWrittenByTheOperatorAndAcceptedByTheRuntime) {
  std::set<std::string> written;
  for (const auto& job : {ps_job_with_everything(), allreduce_job_on_gpus(), job_without_volumes(),
                          elastic_job(), elastic_ps_job()}) {
    for (const auto& pod : op::desired_pods(job)) {
      for (const auto& arg : args_of(pod)) written.insert(arg);
      const auto parsed = parse_as_the_container(pod);
      ASSERT_TRUE(parsed.config) << pod["metadata"]["name"] << ": " << json(args_of(pod)).dump();
      EXPECT_EQ(parsed.exit_code, contract::kExitOk);
    }
  }
  for (const auto& f : contract::flag::kAll) {
    EXPECT_EQ(written.count(std::string(f.name)), 1U) << f.name << " is never written";
  }
}

TEST(Contract, TheRuntimeReadsEveryValueOfTheSpec) {
  const auto job = ps_job_with_everything();
  const auto parsed = parse_as_the_container(op::desired_pod(job, contract::Role::kWorker, 1));
  ASSERT_TRUE(parsed.config);
  const auto& c = *parsed.config;
  const auto& s = job.spec;
  EXPECT_EQ(c.model, s.model);
  EXPECT_EQ(c.num_classes, s.num_classes);
  EXPECT_EQ(c.dataset, s.dataset);
  EXPECT_TRUE(c.download);
  EXPECT_EQ(c.download_mirror, s.download_mirror);
  EXPECT_EQ(c.epochs, s.epochs);
  EXPECT_EQ(c.batch_size, s.batch_size);
  EXPECT_EQ(contract::name_of(train::kOptimizerNames, c.optimizer.kind), s.optimizer);
  EXPECT_DOUBLE_EQ(c.optimizer.momentum, s.momentum);
  EXPECT_EQ(c.optimizer.nesterov, s.nesterov);
  EXPECT_DOUBLE_EQ(c.optimizer.weight_decay, s.weight_decay);
  EXPECT_DOUBLE_EQ(c.schedule.base_lr, s.learning_rate);
  EXPECT_EQ(c.schedule.kind, train::ScheduleKind::kStep);  // spec: "step"
  EXPECT_DOUBLE_EQ(c.schedule.warmup_epochs, s.warmup_epochs);
  EXPECT_DOUBLE_EQ(c.label_smoothing, s.label_smoothing);
  EXPECT_EQ(contract::name_of(train::kPrecisionNames, c.precision),
            contract::name_of(op::kPrecisionNames, s.precision));
  EXPECT_EQ(c.seed, static_cast<uint64_t>(s.seed));
  EXPECT_EQ(c.checkpoint_every_steps, s.checkpoint_every_steps);
  EXPECT_EQ(c.keep_checkpoints, s.keep_checkpoints);
  EXPECT_EQ(c.max_unsaved_seconds, s.max_unsaved_seconds);
  EXPECT_EQ(c.stall_seconds, static_cast<double>(*s.stall_timeout_seconds));
  EXPECT_EQ(c.stall_startup_seconds, static_cast<double>(*s.stall_startup_seconds));
  EXPECT_EQ(c.metrics_port, contract::kMetricsPort.number);
  EXPECT_EQ(c.metrics_linger, contract::kMetricsLingerSeconds);
  EXPECT_EQ(c.distributed.strategy, train::Strategy::kParameterServer);
  EXPECT_EQ(ps::mode_name(c.distributed.ps.mode), s.ps_mode);
  EXPECT_EQ(c.distributed.ps.staleness, *s.staleness);
  EXPECT_EQ(c.distributed.job.cluster.ps.size(), 2U);
  EXPECT_EQ(c.distributed.job.role, contract::Role::kWorker);
  EXPECT_EQ(c.distributed.job.index, 1);

  const auto gpu_job = allreduce_job_on_gpus();
  const auto rank2 = parse_as_the_container(op::desired_pod(gpu_job, contract::Role::kWorker, 2));
  ASSERT_TRUE(rank2.config);
  const auto& ar = rank2.config->distributed.allreduce;
  EXPECT_EQ(rank2.config->device, "cuda");
  EXPECT_EQ(contract::name_of(allreduce::kBackendNames, ar.backend), gpu_job.spec.backend);
  EXPECT_DOUBLE_EQ(ar.bucket_cap_mb, gpu_job.spec.bucket_cap_mb);
  EXPECT_FALSE(ar.overlap);
  EXPECT_DOUBLE_EQ(ar.timeout_seconds, *gpu_job.spec.collective_timeout_seconds);
  EXPECT_EQ(ar.rank, 2);
  EXPECT_EQ(ar.world_size, 3);
  EXPECT_EQ(ar.master_port, contract::kC10dStorePort.number);
}

// The parsed configuration; fails the test when cifar-train refuses the pod's command line.
train::TrainConfig runtime_config(const json& pod) {
  auto parsed = parse_as_the_container(pod);
  if (!parsed.config) throw std::runtime_error("cifar-train refused " + json(args_of(pod)).dump());
  return *parsed.config;
}

std::string env_of(const json& pod, const std::string& name) {
  for (const auto& e : pod["spec"]["containers"][0]["env"]) {
    if (e["name"] == name) return e.contains("value") ? e["value"].get<std::string>() : "(ref)";
  }
  return "";
}

TEST(Contract, CifarTrainTakesEveryPrecisionTheOperatorWrites) {
  for (const auto& [name, precision] : op::kPrecisionNames) {
    const auto job = make_job(json({{"training", {{"precision", name}}},
                                    {"strategy", {{"type", "AllReduce"}}},
                                    {"replicaSpecs", {{"Worker", {{"replicas", 1}}}}}})
                                  .dump());
    ASSERT_EQ(job.spec.precision, precision);
    const auto config = runtime_config(op::desired_pod(job, contract::Role::kWorker, 0));
    EXPECT_EQ(contract::name_of(train::kPrecisionNames, config.precision), name);
  }
}

TEST(Contract, CifarTrainParsesAPsPodsArgumentsAsTheSpecSays) {
  const auto job = make_job(R"({
    "strategy": {"type": "ParameterServer", "parameterServer": {"mode": "async"}},
    "replicaSpecs": {"PS": {"replicas": 1}, "Master": {"replicas": 1}, "Worker": {"replicas": 2},
                     "Evaluator": {"replicas": 1}}})");
  const auto config = runtime_config(op::desired_pod(job, contract::Role::kWorker, 1));
  EXPECT_EQ(config.model, "resnet20");
  EXPECT_EQ(config.epochs, 100);
  EXPECT_EQ(config.batch_size, 64);
  // The run's own directory: namespace, name and UID (a job re-applied under its name is a new
  // run).
  EXPECT_EQ(config.model_dir, "/checkpoints/team/mnist-uid-1");
  EXPECT_EQ(config.data_dir, "/data");
  EXPECT_EQ(config.distributed.strategy, train::Strategy::kParameterServer);
  EXPECT_EQ(config.distributed.ps.mode, ps::Mode::kAsync);
  EXPECT_TRUE(config.distributed.enabled);
  EXPECT_EQ(config.distributed.job.role, cluster::Role::kWorker);
  EXPECT_EQ(config.distributed.job.index, 1);
  EXPECT_EQ(config.device, "cpu");
}

TEST(Contract, AllReducePodsGetRanksAndTheRuntimeReadsThem) {
  const auto job = make_job(R"({
    "strategy": {"type": "AllReduce", "allReduce": {"backend": "gloo", "overlap": false}},
    "replicaSpecs": {"Worker": {"replicas": 3}, "Evaluator": {"replicas": 1}},
    "runPolicy": {"restartPolicy": "ExitCode"}})");
  for (int i = 0; i < 3; ++i) {
    const auto pod = op::desired_pod(job, contract::Role::kWorker, i);
    EXPECT_EQ(pod["spec"]["restartPolicy"], "Never");  // ExitCode: the operator recreates
    EXPECT_EQ(env_of(pod, contract::env::kMasterAddr), "mnist-worker-0.mnist.team.svc");
    EXPECT_EQ(env_of(pod, contract::env::kWorldSize), "3");
    const auto config = runtime_config(pod);
    EXPECT_EQ(config.distributed.strategy, train::Strategy::kAllReduce);
    EXPECT_EQ(config.distributed.allreduce.rank, i);
    EXPECT_EQ(config.distributed.allreduce.world_size, 3);
    EXPECT_EQ(config.distributed.allreduce.master_addr, "mnist-worker-0.mnist.team.svc");
    EXPECT_EQ(config.distributed.allreduce.master_port, 29500);
    EXPECT_EQ(config.distributed.allreduce.backend, allreduce::Backend::kGloo);
    EXPECT_FALSE(config.distributed.allreduce.overlap);
  }
  const auto evaluator = op::desired_pod(job, contract::Role::kEvaluator, 0);
  EXPECT_EQ(env_of(evaluator, contract::env::kRank), "");  // not a rank: it follows checkpoints
  EXPECT_EQ(runtime_config(evaluator).distributed.job.role, cluster::Role::kEvaluator);
}

// An elastic job's workers meet at its rendezvous store pod, told of a world of maxReplicas with
// their slot as RANK; the runtime reads them as an elastic job whose every trainer may be the chief
// (and so gets the store's credentials). The store pod runs the same image's rendezvous-store on
// the port the workers are told.
TEST(Contract, AnElasticJobsWorkersMeetAtItsRendezvousStorePod) {
  const auto job = elastic_job();
  for (int i = 0; i < 3; ++i) {
    const auto pod = op::desired_pod(job, contract::Role::kWorker, i);
    EXPECT_EQ(env_of(pod, contract::env::kMasterAddr), "mnist-rendezvous.mnist.team.svc");
    EXPECT_EQ(env_of(pod, contract::env::kWorldSize), "4");
    const auto config = runtime_config(pod);
    EXPECT_TRUE(config.distributed.elastic());
    EXPECT_EQ(config.distributed.allreduce.min_world_size, 2);
    EXPECT_EQ(config.distributed.allreduce.world_size, 4);
    EXPECT_EQ(config.distributed.allreduce.rank, i);
    EXPECT_TRUE(config.distributed.uses_store());
    EXPECT_TRUE(op::uses_store(job.spec, contract::Role::kWorker, i));
  }
  const auto store = op::desired_rendezvous_store(job);
  EXPECT_TRUE(op::is_rendezvous_store(store));
  EXPECT_EQ(store["metadata"]["name"], "mnist-rendezvous");
  EXPECT_EQ(store["spec"]["hostname"], "mnist-rendezvous");
  EXPECT_EQ(store["spec"]["subdomain"], "mnist");
  const auto& container = store["spec"]["containers"][0];
  EXPECT_EQ(container["args"], json({"rendezvous-store", "--port", "29500"}));
  EXPECT_EQ(container["ports"][0]["containerPort"], contract::kC10dStorePort.number);
  EXPECT_FALSE(op::pod_role(store));  // no replica: the reconcile's tallies leave it out
}

// An elastic parameter-server job's trainers are told the fewest trainers there may be (the master
// counts) and list the most workers there may be; the runtime reads them as an elastic job whose
// sync updates read the global batch of every trainer listed. No store: its chief is the master.
TEST(Contract, AnElasticPsJobsTrainersKnowTheFewestAndTheMost) {
  const auto job = elastic_ps_job();
  for (const auto& [role, index] : {std::pair{contract::Role::kMaster, 0},
                                    {contract::Role::kWorker, 0},
                                    {contract::Role::kWorker, 1}}) {
    const auto pod = op::desired_pod(job, role, index);
    const auto config = runtime_config(pod);
    EXPECT_EQ(config.distributed.ps.min_trainers, 2);
    EXPECT_EQ(config.distributed.job.trainer_count(), 4);
    EXPECT_EQ(config.global_batch, 4 * config.batch_size);
    EXPECT_FALSE(config.distributed.elastic());  // the all-reduce sense: no rounds, no store
    EXPECT_EQ(config.distributed.uses_store(), role == contract::Role::kMaster);
  }
}

TEST(Contract, ThePodsPortsAreTheOnesTheRuntimeListensOnByDefault) {
  const auto pod = op::desired_pod(allreduce_job_on_gpus(), contract::Role::kWorker, 0);
  std::set<std::pair<std::string, int>> ports;
  for (const auto& p : pod["spec"]["containers"][0]["ports"]) {
    ports.emplace(p["name"].get<std::string>(), p["containerPort"].get<int>());
  }
  EXPECT_EQ(ports,
            (std::set<std::pair<std::string, int>>{
                {std::string(contract::kGrpcPort.name), contract::kGrpcPort.number},
                {std::string(contract::kC10dStorePort.name), contract::kC10dStorePort.number},
                {std::string(contract::kMetricsPort.name), contract::kMetricsPort.number}}));
  const train::TrainConfig defaults;
  EXPECT_EQ(defaults.metrics_port, contract::kMetricsPort.number);
  EXPECT_EQ(defaults.distributed.allreduce.master_port, contract::kC10dStorePort.number);
  const cluster::Ranks ranks;
  EXPECT_EQ(ranks.master_port, contract::kC10dStorePort.number);
  // A parameter server's address in TF_CONFIG is where the runtime serves gRPC.
  const auto tf_config =
      cluster::parse_tf_config(op::tf_config(ps_job_with_everything(), contract::Role::kPs, 0));
  const auto& ps0 = tf_config.cluster.ps.at(0);
  EXPECT_EQ(ps0.substr(ps0.rfind(':') + 1), std::to_string(contract::kGrpcPort.number));
}

TEST(Contract, RoleNamesRoundTripAndChiefIsTheMaster) {
  for (const auto role : contract::kRoles) {
    EXPECT_EQ(contract::parse_role(contract::role_name(role)), role);
    EXPECT_EQ(cluster::parse_role(std::string(contract::role_name(role))), role);
  }
  EXPECT_EQ(contract::parse_role("chief"), contract::Role::kMaster);
  EXPECT_FALSE(contract::parse_role("Worker"));  // the CRD's key, not a role name
  EXPECT_THROW(cluster::parse_role("boss"), std::invalid_argument);
}

// A registry serialized as its endpoint serves it.
std::string exposition(metrics::RuntimeMetrics& m) {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, m.registry().Collect());
  return out.str();
}

TEST(Contract, TheMetricsTheRuntimeServesFillTheJobsProgress) {
  metrics::RuntimeMetrics chief({"mnist", "master", "0"}, "");
  chief.set_epoch(3);
  for (int i = 0; i < 4; ++i) {
    chief.record_step({0.1, 0.01, 64, 1.5 - 0.1 * i, 0.25 + 0.05 * i, 640});
  }
  // The job's position, as the loop sets it: a PS's version counts every trainer's updates.
  chief.set_job_position(40, 1000);
  metrics::RuntimeMetrics evaluator({"mnist", "evaluator", "0"}, "");
  evaluator.set_test_accuracy(0.42);
  const std::vector<op::PodMetrics> scraped = {
      {"master", 0, op::parse_metric_samples(exposition(chief))},
      {"evaluator", 0, op::parse_metric_samples(exposition(evaluator))}};
  const auto progress = op::job_progress(scraped, {true, true}, "2026-11-23T00:00:00Z");
  ASSERT_TRUE(progress);
  EXPECT_EQ((*progress)["epoch"], 3);
  EXPECT_EQ((*progress)["step"], 40);
  EXPECT_EQ((*progress)["progressPercentage"], 4);
  EXPECT_NEAR((*progress)["loss"].get<double>(), 1.2, 1e-9);
  EXPECT_NEAR((*progress)["trainAccuracy"].get<double>(), 0.4, 1e-9);
  EXPECT_NEAR((*progress)["imagesPerSecond"].get<double>(), 640, 1e-9);
  EXPECT_NEAR((*progress)["testAccuracy"].get<double>(), 0.42, 1e-9);
}

// A parameter server's word on its trainers reaches status.progress.trainers, ranks and all.
TEST(Contract, WhatAParameterServerSaysOfItsTrainersFillsTheJobsTrainers) {
  metrics::RuntimeMetrics chief({"j", "master", "0"}, "");
  chief.set_job_position(120, 1000);
  metrics::RuntimeMetrics ps({"j", "ps", "0"}, "");
  ps.set_ps_trainer_training(0, true);
  ps.set_ps_trainer_training(1, false);
  ps.record_ps_trainer_dropped(1, 117);
  op::PodMetrics ps_scraped{"ps", 0, op::parse_metric_samples(exposition(ps))};
  ps_scraped.by_trainer =
      op::parse_samples_by_label(exposition(ps), contract::metric::kTrainerLabel);
  const auto progress = op::job_progress(
      {{"master", 0, op::parse_metric_samples(exposition(chief))}, ps_scraped}, {true, false}, "t");
  ASSERT_TRUE(progress);
  EXPECT_EQ((*progress)["trainers"],
            nlohmann::json::parse(R"({"expected": 2, "training": 1, "missing":
              [{"trainer": 1, "droppedAtStep": 117}]})"));
}

// A file of the source tree ("" if there is none).
std::string source_file(const std::string& path) {
  std::ifstream in(std::string(CIFAR_SOURCE_DIR) + "/" + path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The pods' labels are what Prometheus finds the training pods by and turns into the series'
// cifartrain_job, replica_type and replica_index, which the alerts and the dashboard select by.
TEST(Contract, PrometheusFindsThePodsAndLabelsTheirSeriesByThePodsLabels) {
  // Kubernetes discovery's name for a pod label: its key, every other character than a letter or
  // a digit as '_'.
  const auto discovered = [](std::string key) {
    std::replace_if(
        key.begin(), key.end(), [](unsigned char c) { return std::isalnum(c) == 0; }, '_');
    return "__meta_kubernetes_pod_label_" + key + "]";  // the end of a source_labels list
  };
  for (const auto* path : {"deploy/prometheus/prometheus.yml",
                           "deploy/helm/cifar-operator/templates/podmonitor.yaml"}) {
    const auto config = source_file(path);
    ASSERT_FALSE(config.empty()) << path;
    EXPECT_NE(config.find(contract::label::kJobName), std::string::npos) << path;  // its selector
    for (const auto* key : {contract::label::kJobName, contract::label::kReplicaType,
                            contract::label::kReplicaIndex}) {
      EXPECT_NE(config.find(discovered(key)), std::string::npos) << path << " relabels no " << key;
    }
  }
}

TEST(Contract, UsageErrorsArePermanentForTheOperator) {
  const char* argv[] = {"cifar-train", "--strategy", "gossip"};
  const auto parsed = cli::parse_command_line(3, argv);
  EXPECT_FALSE(parsed.config);
  EXPECT_EQ(parsed.exit_code, contract::kExitUsage);
  EXPECT_FALSE(contract::is_retryable_exit(parsed.exit_code));
  EXPECT_TRUE(contract::is_retryable_exit(contract::kExitSignalBase + 9));  // SIGKILL
}

}  // namespace
}  // namespace cifar
