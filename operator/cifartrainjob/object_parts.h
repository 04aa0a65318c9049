// Pieces the job's objects share (desired_state.cpp, desired_pod.cpp): not part of the reconcile's
// interface.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "api/job.h"

namespace cifar::op {

// The reference that makes an object the job's: garbage-collected with it.
nlohmann::json owner_reference(const Job& job);
// {"name": name, "value": value}: an env entry of a container.
nlohmann::json env_var(const std::string& name, const std::string& value);
// Where the pods find the dataset (its volume's path, else /data on an emptyDir).
std::string data_path(const JobSpec& spec);
// Where the pods find the checkpoint volume (its path, else /checkpoints on an emptyDir).
std::string checkpoint_path(const JobSpec& spec);

}  // namespace cifar::op
