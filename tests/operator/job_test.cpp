// Reading a CifarTrainJob's spec: defaults for absent fields, and InvalidSpec naming the field
// for what the CRD schema cannot check.
#include "api/job.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace cifar::op::job_test {
namespace {

using nlohmann::json;

json minimal_spec() {
  return json::parse(R"({
    "image": "cifar-train:test",
    "model": {"name": "resnet20"},
    "dataset": {"name": "cifar10"},
    "strategy": {"type": "AllReduce"},
    "replicaSpecs": {"Worker": {"replicas": 2}}
  })");
}

TEST(ParseSpec, AbsentFieldsGetTheCrdDefaults) {
  const auto s = parse_spec(minimal_spec());
  EXPECT_EQ(s.model, "resnet20");
  EXPECT_EQ(s.epochs, 100);
  EXPECT_EQ(s.batch_size, 64);
  EXPECT_EQ(s.optimizer, "sgd");
  EXPECT_TRUE(s.nesterov);
  EXPECT_FALSE(s.parameter_server);
  EXPECT_EQ(s.backend, "auto");
  EXPECT_EQ(s.precision, Precision::kAuto);
  EXPECT_EQ(s.restart_policy, RestartPolicy::kOnFailure);
  EXPECT_EQ(s.clean_pod_policy, CleanPodPolicy::kRunning);
  EXPECT_EQ(s.spread_across_nodes, NodeSpread::kPreferred);
  EXPECT_EQ(s.backoff_limit, 3);
  EXPECT_EQ(s.count(Role::kWorker), 2);
  EXPECT_EQ(s.count(Role::kMaster), 0);
  EXPECT_EQ(s.count(Role::kPs), 0);
  EXPECT_FALSE(s.active_deadline_seconds.has_value());
  EXPECT_FALSE(s.stall_timeout_seconds.has_value());  // each trainer derives its own
  EXPECT_FALSE(s.stall_startup_seconds.has_value());  // the runtime's floor
  EXPECT_EQ(s.on_stall, OnStall::kRestart);
}

TEST(ParseSpec, ReadsEverySection) {
  auto spec = minimal_spec();
  spec["strategy"] = {{"type", "ParameterServer"},
                      {"parameterServer", {{"mode", "ssp"}, {"staleness", 4}}}};
  spec["replicaSpecs"] = {
      {"PS", {{"replicas", 2}}},
      {"Master", {{"replicas", 1}}},
      {"Worker", {{"replicas", 3}, {"resources", {{"limits", {{"nvidia.com/gpu", "2"}}}}}}},
      {"Evaluator", json::object()}};
  spec["dataset"]["volume"] = {{"claimName", "cifar"}};
  spec["checkpoint"] = {{"volume", {{"claimName", "checkpoints"}}}};
  spec["training"] = {{"precision", "bf16"}};
  spec["runPolicy"] = {
      {"restartPolicy", "ExitCode"},
      {"cleanPodPolicy", "All"},
      {"activeDeadlineSeconds", 600},
      {"startupDeadlineSeconds", 120},
      {"terminatingDeadlineSeconds", 0},
      {"nodeFailureGraceSeconds", 15},
      {"stallTimeoutSeconds", 0},
      {"stallStartupSeconds", 45},
      {"onStall", "Report"},
      {"schedulingPolicy", {{"schedulerName", "volcano"}, {"spreadAcrossNodes", "Required"}}}};
  const auto s = parse_spec(spec);
  EXPECT_TRUE(s.parameter_server);
  EXPECT_EQ(s.ps_mode, "ssp");
  EXPECT_EQ(s.precision, Precision::kBf16);
  EXPECT_EQ(s.restart_policy, RestartPolicy::kExitCode);
  EXPECT_EQ(s.clean_pod_policy, CleanPodPolicy::kAll);
  EXPECT_EQ(s.staleness, 4);
  EXPECT_EQ(s.count(Role::kPs), 2);
  EXPECT_EQ(s.count(Role::kEvaluator), 1);  // present without replicas: one
  EXPECT_EQ(s.startup_deadline_seconds, 120);
  EXPECT_EQ(s.terminating_deadline_seconds, 0);
  EXPECT_EQ(s.node_failure_grace_seconds, 15);
  EXPECT_EQ(s.stall_timeout_seconds, 0);
  EXPECT_EQ(s.stall_startup_seconds, 45);
  EXPECT_EQ(s.on_stall, OnStall::kReport);
  EXPECT_EQ(s.spread_across_nodes, NodeSpread::kRequired);
  EXPECT_EQ(s.replicas.at(Role::kWorker).gpus(), 2);
  ASSERT_TRUE(s.dataset_volume.has_value());
  EXPECT_EQ(s.dataset_volume->path, "/data");
  EXPECT_EQ(s.active_deadline_seconds, 600);
  EXPECT_EQ(s.scheduler_name, "volcano");
}

// The spec with `edit` applied is refused, naming `field`.
void expect_invalid(const std::function<void(json&)>& edit, const std::string& field,
                    const std::string& words) {
  auto spec = minimal_spec();
  edit(spec);
  try {
    (void)parse_spec(spec);
    ADD_FAILURE() << "accepted: " << spec.dump();
  } catch (const InvalidSpec& e) {
    EXPECT_EQ(e.field(), field) << e.what();
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).rfind("spec." + field, 0), 0U) << e.what();
  }
}

// An elastic job's bounds, as the CRD's CEL rules check them, for a server that did not; and what
// only the operator knows: an elastic job shares its run. Queued it may be, but not placed in one
// topology domain: its workers above the minimum are admitted one by one.
TEST(ParseSpec, AnElasticJobsBoundsAndNeedsAreInvalidSpecNamingTheField) {
  const auto elastic = [](json& s, int replicas, int min, int max) {
    s["replicaSpecs"]["Worker"] = {
        {"replicas", replicas}, {"minReplicas", min}, {"maxReplicas", max}};
    s["checkpoint"] = {{"volume", {{"claimName", "c"}}}};
  };
  auto ok = minimal_spec();
  elastic(ok, 3, 2, 4);
  const auto parsed = parse_spec(ok);
  EXPECT_TRUE(parsed.elastic());
  EXPECT_EQ(parsed.replicas.at(Role::kWorker).min_replicas, 2);
  EXPECT_EQ(parsed.replicas.at(Role::kWorker).max_replicas, 4);
  EXPECT_FALSE(parse_spec(minimal_spec()).elastic());

  expect_invalid([&](json& s) { elastic(s, 3, 4, 2); }, "replicaSpecs.Worker.minReplicas",
                 "at most maxReplicas");
  expect_invalid([&](json& s) { elastic(s, 5, 2, 4); }, "replicaSpecs.Worker.replicas",
                 "within [minReplicas, maxReplicas]");
  expect_invalid(
      [&](json& s) {
        elastic(s, 3, 2, 4);
        s["replicaSpecs"]["Worker"].erase("maxReplicas");
      },
      "replicaSpecs.Worker", "together");
  expect_invalid(
      [&](json& s) {
        elastic(s, 3, 2, 4);
        s["replicaSpecs"]["Evaluator"] = {{"replicas", 1}, {"minReplicas", 1}, {"maxReplicas", 1}};
      },
      "replicaSpecs.Evaluator.minReplicas", "Worker only");
  expect_invalid(
      [&](json& s) {
        elastic(s, 3, 2, 4);
        s["replicaSpecs"]["Master"] = {{"replicas", 1}};
      },
      "replicaSpecs.Master", "no Master");
  expect_invalid(
      [&](json& s) {
        elastic(s, 3, 2, 4);
        s["strategy"]["type"] = "ParameterServer";
        s["replicaSpecs"]["PS"] = {{"replicas", 1}};
      },
      "replicaSpecs.Master", "parameter-server job needs a Master");
  expect_invalid(
      [&](json& s) {
        elastic(s, 3, 2, 4);
        s.erase("checkpoint");
      },
      "checkpoint.volume", "chief, which writes the run, moves among them");
  auto queued = minimal_spec();
  elastic(queued, 3, 2, 4);
  queued["runPolicy"] = {{"schedulingPolicy", {{"queue", "team"}}}};
  EXPECT_EQ(parse_spec(queued).queue, "team");
  expect_invalid(
      [&](json& s) {
        elastic(s, 3, 2, 4);
        s["runPolicy"] = {
            {"schedulingPolicy", {{"queue", "team"}, {"topology", {{"required", "rack"}}}}}};
      },
      "runPolicy.schedulingPolicy.topology", "not for an elastic job");
}

// runPolicy.schedulingPolicy.topology: one of required or preferred, and only with a queue.
TEST(ParseSpec, ATopologyRequestIsOneLevelForAQueuedJob) {
  const auto with = [](json topology, const std::string& queue = "team") {
    return [topology = std::move(topology), queue](json& s) {
      s["runPolicy"]["schedulingPolicy"] = {{"topology", topology}};
      if (!queue.empty()) s["runPolicy"]["schedulingPolicy"]["queue"] = queue;
    };
  };
  auto spec = minimal_spec();
  with({{"required", "cifartrain.io/rack"}})(spec);
  const auto required = parse_spec(spec).topology;
  ASSERT_TRUE(required.has_value());
  EXPECT_TRUE(required->required);
  EXPECT_EQ(required->level, "cifartrain.io/rack");
  spec = minimal_spec();
  with({{"preferred", "cifartrain.io/block"}})(spec);
  const auto preferred = parse_spec(spec).topology;
  ASSERT_TRUE(preferred.has_value());
  EXPECT_FALSE(preferred->required);
  EXPECT_EQ(preferred->level, "cifartrain.io/block");
  EXPECT_FALSE(parse_spec(minimal_spec()).topology.has_value());

  const std::string field = "runPolicy.schedulingPolicy.topology";
  expect_invalid(with(json::object()), field, "one of required or preferred");
  expect_invalid(with({{"required", "a"}, {"preferred", "b"}}), field,
                 "one of required or preferred");
  expect_invalid(with({{"required", "cifartrain.io/rack"}}, ""), field,
                 "needs runPolicy.schedulingPolicy.queue");
}

TEST(ParseSpec, WhatTheSchemaCannotCheckIsInvalidSpecNamingTheField) {
  expect_invalid(
      [](json& s) {
        s["replicaSpecs"] = {{"Evaluator", {{"replicas", 1}}}};
      },
      "replicaSpecs", "needs a Master or at least one Worker");
  expect_invalid([](json& s) { s["strategy"]["type"] = "ParameterServer"; }, "replicaSpecs.PS",
                 "needs at least one PS");
  expect_invalid(
      [](json& s) {
        s["checkpoint"] = {{"resumeFrom", "../other-team/run"}};
      },
      "checkpoint.resumeFrom", "inside the checkpoint volume");
  // An evaluator reads the trainers' checkpoints: an emptyDir of its own would never have one.
  expect_invalid(
      [](json& s) {
        s["replicaSpecs"]["Evaluator"] = {{"replicas", 1}};
      },
      "checkpoint.volume", "Evaluator needs a checkpoint volume or checkpoint.uri");
  // checkpoint.uri: an s3:// URI the runtime takes, instead of a volume, with credentials.
  const json store = {{"uri", "s3://ckpt/team"}, {"s3", {{"credentialsSecret", "keys"}}}};
  expect_invalid(
      [&](json& s) {
        s["checkpoint"] = {{"uri", "s3://Bad_Bucket/x"}, {"s3", store["s3"]}};
      },
      "checkpoint.uri", "is not a bucket name S3 allows");
  expect_invalid(
      [&](json& s) {
        s["checkpoint"] = store;
        s["checkpoint"]["volume"] = {{"claimName", "c"}};
      },
      "checkpoint.uri", "alternative to checkpoint.volume");
  expect_invalid(
      [&](json& s) {
        s["checkpoint"] = {{"uri", "s3://ckpt/team"}};
      },
      "checkpoint.s3.credentialsSecret", "is required with checkpoint.uri");
  // dataset.uri: CIFAR files, in the checkpoint store, instead of a volume or a download.
  expect_invalid([&](json& s) { s["dataset"]["uri"] = "s3://data/cifar10"; }, "dataset.uri",
                 "is read from the checkpoint store: set checkpoint.uri and checkpoint.s3");
  expect_invalid(
      [&](json& s) {
        s["checkpoint"] = store;
        s["dataset"] = {{"name", "synthetic"}, {"uri", "s3://data/x"}};
      },
      "dataset.uri", "holds cifar10 or cifar100 binary files, not synthetic");
  expect_invalid(
      [&](json& s) {
        s["checkpoint"] = store;
        s["dataset"]["uri"] = "s3://data/cifar10";
        s["dataset"]["volume"] = {{"claimName", "c"}};
      },
      "dataset.uri", "alternative to dataset.volume and dataset.download");
  expect_invalid(
      [&](json& s) {
        s["checkpoint"] = store;
        s["checkpoint"]["s3"]["endpoint"] = "seaweedfs:8333";
      },
      "checkpoint.s3.endpoint", "http:// or https://");
  expect_invalid(
      [&](json& s) {
        s["checkpoint"] = {{"resumeFrom", "s3://ckpt/team/ns/run-1"}};
      },
      "checkpoint.resumeFrom", "needs checkpoint.uri");
  expect_invalid(
      [](json& s) {
        s["replicaSpecs"]["PS"] = {{"replicas", 1}};
      },
      "replicaSpecs.PS", "need strategy.type ParameterServer");
  expect_invalid(
      [](json& s) {
        s["strategy"]["allReduce"] = {{"backend", "nccl"}};
      },
      "strategy.allReduce.backend", "nccl needs nvidia.com/gpu in replicaSpecs.Worker");
  expect_invalid(
      [](json& s) {
        s["strategy"]["allReduce"] = {{"backend", "nccl"}};
        s["replicaSpecs"]["Worker"]["resources"] = {{"limits", {{"nvidia.com/gpu", 1}}}};
        s["training"] = {{"device", "cpu"}};
      },
      "training.device", "nccl runs on GPUs only");
  expect_invalid(
      [](json& s) {
        s["replicaSpecs"]["Worker"]["resources"] = {{"limits", {{"nvidia.com/gpu", "0.5"}}}};
      },
      "replicaSpecs.Worker.resources.limits", "whole number of GPUs");
  expect_invalid([](json& s) { s["model"]["numClasses"] = 100; }, "model.numClasses",
                 "does not match cifar10's 10 classes");
  expect_invalid(
      [](json& s) {
        s["training"] = {{"epochs", "ten"}};
      },
      "training.epochs", "wrong type (string)");
  expect_invalid([](json& s) { s["strategy"]["type"] = "Gossip"; }, "strategy.type",
                 "ParameterServer or AllReduce");
  expect_invalid([](json& s) { s.erase("image"); }, "image", "required");
  expect_invalid(
      [](json& s) {
        s["dataset"] = {{"name", "fashion-mnist"}, {"download", json::object()}};
      },
      "dataset.download", "only cifar10 and cifar100");
}

// Each name of `names` at `at` in the spec is read as its enum into `field`; any other name is
// InvalidSpec naming the field and listing the names it could be.
template <typename Enum, size_t N>
void expect_every_name_read(const EnumNames<Enum, N>& names, const std::string& at,
                            Enum JobSpec::*field) {
  const json::json_pointer pointer(at);
  for (const auto& [name, value] : names) {
    auto spec = minimal_spec();
    spec[pointer] = name;
    EXPECT_EQ(parse_spec(spec).*field, value) << at << ": " << name;
  }
  auto dotted = at.substr(1);
  std::replace(dotted.begin(), dotted.end(), '/', '.');
  expect_invalid([&](json& s) { s[pointer] = "Sometimes"; }, dotted,
                 "'Sometimes' is none of " + contract::list_names(names));
}

TEST(ParseSpec, EveryNameOfAnEnumFieldIsReadAndAnyOtherRefused) {
  expect_every_name_read(kPrecisionNames, "/training/precision", &JobSpec::precision);
  expect_every_name_read(kDeviceNames, "/training/device", &JobSpec::device);
  expect_every_name_read(kRestartPolicyNames, "/runPolicy/restartPolicy", &JobSpec::restart_policy);
  expect_every_name_read(kCleanPodPolicyNames, "/runPolicy/cleanPodPolicy",
                         &JobSpec::clean_pod_policy);
  expect_every_name_read(kNodeSpreadNames, "/runPolicy/schedulingPolicy/spreadAcrossNodes",
                         &JobSpec::spread_across_nodes);
  expect_every_name_read(kOnStallNames, "/runPolicy/onStall", &JobSpec::on_stall);
  // cifar-train takes fp16, the CRD not yet (no loss scaling): refused here too.
  expect_invalid(
      [](json& s) {
        s["training"] = {{"precision", "fp16"}};
      },
      "training.precision", "'fp16' is none of auto, fp32, bf16");
  expect_invalid(
      [](json& s) {
        s["runPolicy"] = {{"restartPolicy", 1}};
      },
      "runPolicy.restartPolicy", "wrong type (number)");
}

// The text of `line` after `label`, up to the first of `ends`; "" without the label.
std::string text_after(const std::string& line, const std::string& label, const char* ends) {
  const auto start = line.find(label);
  if (start == std::string::npos) return "";
  const auto from = start + label.size();
  return line.substr(from, line.find_first_of(ends, from) - from);
}

// The enum and default of the CRD's property `key` (deploy/crds/): `enum: [a, b]` and
// `default: a` on its line or on the lines under it.
struct CrdEnum {
  std::vector<std::string> names;
  std::string default_name;
};

CrdEnum crd_enum(const std::string& key) {
  std::ifstream crd(std::string(CIFAR_SOURCE_DIR) +
                    "/deploy/crds/cifartrain.io_cifartrainjobs.yaml");
  CrdEnum found;
  std::optional<size_t> key_indent;  // once the property's line is read
  std::string line;
  while (std::getline(crd, line)) {
    const auto indent = line.find_first_not_of(' ');
    if (indent == std::string::npos) continue;  // a blank line
    if (!key_indent) {
      if (line.compare(indent, key.size() + 1, key + ":") != 0) continue;
      key_indent = indent;
    } else if (indent <= *key_indent) {
      break;  // the next property
    }
    std::istringstream list(text_after(line, "enum: [", "]"));
    for (std::string name; std::getline(list >> std::ws, name, ',');) {
      found.names.push_back(name);
    }
    if (const auto name = text_after(line, "default: ", ",}"); !name.empty()) {
      found.default_name = name;
    }
  }
  return found;
}

template <typename Enum, size_t N>
void expect_crds_names(const std::string& key, const EnumNames<Enum, N>& names,
                       Enum default_value) {
  const auto crd = crd_enum(key);
  std::vector<std::string> ours;
  for (const auto& entry : names) ours.emplace_back(entry.first);
  EXPECT_EQ(ours, crd.names) << key;
  EXPECT_EQ(name_of(names, default_value), crd.default_name) << key;
}

TEST(ParseSpec, ReadsAnObjectStoreForTheCheckpoints) {
  auto spec = minimal_spec();
  spec["checkpoint"] =
      json::parse(R"({"uri": "s3://ckpt/team/", "resumeFrom": "s3://ckpt/other/run-1",
      "s3": {"endpoint": "http://seaweedfs.storage:8333", "region": "eu-west-1",
             "addressing": "Path", "credentialsSecret": "ckpt-keys"}})");
  const auto s = parse_spec(spec);
  ASSERT_TRUE(s.checkpoint_store);
  EXPECT_FALSE(s.checkpoint_volume);
  EXPECT_EQ(s.checkpoint_store->uri, "s3://ckpt/team/");
  EXPECT_EQ(s.checkpoint_store->endpoint, "http://seaweedfs.storage:8333");
  EXPECT_EQ(s.checkpoint_store->region, "eu-west-1");
  EXPECT_EQ(s.checkpoint_store->addressing, "Path");
  EXPECT_EQ(s.checkpoint_store->credentials_secret, "ckpt-keys");
  EXPECT_EQ(s.resume_from, "s3://ckpt/other/run-1");
}

TEST(ParseSpec, TheEnumFieldsNamesAndDefaultsAreTheCrds) {
  const JobSpec defaults;
  expect_crds_names("precision", kPrecisionNames, defaults.precision);
  expect_crds_names("device", kDeviceNames, defaults.device);
  expect_crds_names("restartPolicy", kRestartPolicyNames, defaults.restart_policy);
  expect_crds_names("cleanPodPolicy", kCleanPodPolicyNames, defaults.clean_pod_policy);
  expect_crds_names("spreadAcrossNodes", kNodeSpreadNames, defaults.spread_across_nodes);
  expect_crds_names("onStall", kOnStallNames, defaults.on_stall);
}

}  // namespace
}  // namespace cifar::op::job_test
