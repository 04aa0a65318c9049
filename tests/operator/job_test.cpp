// Reading a CifarTrainJob's spec: defaults for absent fields, and InvalidSpec naming the field
// for what the CRD schema cannot check.
#include "api/job.h"

#include <gtest/gtest.h>

namespace cifar::op {
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
  EXPECT_EQ(s.restart_policy, "OnFailure");
  EXPECT_EQ(s.backoff_limit, 3);
  EXPECT_EQ(s.count(Role::kWorker), 2);
  EXPECT_EQ(s.count(Role::kMaster), 0);
  EXPECT_EQ(s.count(Role::kPs), 0);
  EXPECT_FALSE(s.active_deadline_seconds.has_value());
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
  spec["runPolicy"] = {
      {"restartPolicy", "ExitCode"},
      {"activeDeadlineSeconds", 600},
      {"startupDeadlineSeconds", 120},
      {"terminatingDeadlineSeconds", 0},
      {"nodeFailureGraceSeconds", 15},
      {"schedulingPolicy", {{"schedulerName", "volcano"}, {"spreadAcrossNodes", "Required"}}}};
  const auto s = parse_spec(spec);
  EXPECT_TRUE(s.parameter_server);
  EXPECT_EQ(s.ps_mode, "ssp");
  EXPECT_EQ(s.staleness, 4);
  EXPECT_EQ(s.count(Role::kPs), 2);
  EXPECT_EQ(s.count(Role::kEvaluator), 1);  // present without replicas: one
  EXPECT_EQ(s.startup_deadline_seconds, 120);
  EXPECT_EQ(s.terminating_deadline_seconds, 0);
  EXPECT_EQ(s.node_failure_grace_seconds, 15);
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
      "checkpoint.volume", "Evaluator needs a checkpoint volume");
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

}  // namespace
}  // namespace cifar::op
