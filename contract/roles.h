// The roles of a distributed job, named the same by the operator (pod names, labels, the
// TF_CONFIG it writes) and the runtime (TF_CONFIG's task type, --dist-type).
#pragma once

#include <array>
#include <optional>
#include <string_view>

namespace cifar::contract {

enum class Role { kPs, kMaster, kWorker, kEvaluator };
inline constexpr std::array<Role, 4> kRoles = {Role::kPs, Role::kMaster, Role::kWorker,
                                               Role::kEvaluator};

// "ps", "master", "worker", "evaluator".
constexpr std::string_view role_name(Role role) {
  switch (role) {
    case Role::kPs:
      return "ps";
    case Role::kMaster:
      return "master";
    case Role::kWorker:
      return "worker";
    case Role::kEvaluator:
      return "evaluator";
  }
  return "";
}

// The inverse of role_name; "chief" is read as master (TensorFlow's newer name for it).
constexpr std::optional<Role> parse_role(std::string_view name) {
  for (const auto role : kRoles) {
    if (name == role_name(role)) return role;
  }
  if (name == "chief") return Role::kMaster;
  return std::nullopt;
}

// Trainers compute gradients (all-reduce ranks, PS clients); the others serve or evaluate.
constexpr bool is_trainer(Role role) { return role == Role::kMaster || role == Role::kWorker; }

// The job's chief, which initialises, checkpoints, reports and ends the job: master 0, or worker 0
// in a job without a master (Kubeflow's convention; an all-reduce job's rank 0).
constexpr bool is_chief(Role role, int index, bool job_has_master) {
  return index == 0 && (role == Role::kMaster || (role == Role::kWorker && !job_has_master));
}

// Whether a member reads or writes the run's store: the chief, the evaluator, and a parameter
// server (which restores its shard from the checkpoints); in an elastic job every trainer, since
// each round's rank 0 is the chief. The other trainers do not, and on Kubernetes they get no store
// credentials.
constexpr bool uses_store(Role role, int index, bool job_has_master, bool elastic) {
  return is_trainer(role) ? elastic || is_chief(role, index, job_has_master) : true;
}

}  // namespace cifar::contract
