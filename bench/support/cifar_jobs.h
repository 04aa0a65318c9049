// The CifarTrainJobs the operator benchmarks submit: a synthetic-data ResNet-20 parameter-server
// job of the given replicas (they never run: the benchmarks measure the operator), checkpointing
// to a bucket (an evaluator needs a store it shares with the trainers; no pod ever reaches it).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace cifar::bench {

inline nlohmann::json cifar_job(const std::string& name, const nlohmann::json& replica_specs,
                                const nlohmann::json& run_policy = nlohmann::json::object()) {
  nlohmann::json spec = {
      {"image", "cifar-train:bench"},
      {"model", {{"name", "resnet20"}}},
      {"dataset", {{"name", "synthetic"}}},
      {"checkpoint",
       {{"uri", "s3://checkpoints/bench"},
        {"s3", {{"endpoint", "http://store.invalid:8333"}, {"credentialsSecret", "store-keys"}}}}},
      {"strategy", {{"type", "ParameterServer"}, {"parameterServer", {{"mode", "sync"}}}}},
      {"replicaSpecs", replica_specs}};
  if (!run_policy.empty()) spec["runPolicy"] = run_policy;
  return {{"apiVersion", "cifartrain.io/v1alpha1"},
          {"kind", "CifarTrainJob"},
          {"metadata", {{"name", name}}},
          {"spec", spec}};
}

}  // namespace cifar::bench
