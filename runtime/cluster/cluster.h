// Who is who in a distributed job: the cluster (addresses by role) and this process's task, read
// from TF_CONFIG (the operator's env: contract/env.h) or from the seed-compatible local flags.
#pragma once

#include <string>
#include <vector>

#include "contract/roles.h"

namespace cifar::cluster {

using contract::Role;

// contract::parse_role, throwing std::invalid_argument for a name that is no role.
Role parse_role(const std::string& name);
using contract::role_name;

struct ClusterSpec {
  std::vector<std::string> ps;  // "host:port", in index order
  std::vector<std::string> master;
  std::vector<std::string> worker;
  std::vector<std::string> evaluator;
};

struct Job {
  ClusterSpec cluster;
  Role role = Role::kMaster;
  int index = 0;

  // Trainers are the master (rank 0) and the workers (ranks 1..n); without a master, worker 0
  // is rank 0 and the chief (Kubeflow's convention).
  [[nodiscard]] int trainer_count() const;
  [[nodiscard]] bool is_trainer() const;
  [[nodiscard]] int trainer_rank() const;       // throws for ps and evaluator
  [[nodiscard]] bool is_chief() const;          // initialises, checkpoints, reports, ends the job
  [[nodiscard]] std::string task_name() const;  // "worker 1"
};

// Parses TF_CONFIG ({"cluster": {...}, "task": {"type": ..., "index": ...}}); throws
// std::invalid_argument with a message naming the offending field.
Job parse_tf_config(const std::string& json);

// The seed projects' local flags: every process on `host`, ps i on start_port + i, the master on
// start_port + ps_count, worker j on start_port + ps_count + 1 + j, the evaluator after them.
struct LocalFlags {
  std::string type = "master";
  int ps_count = 1;
  int worker_count = 2;  // workers besides the master
  int start_port = 7000;
  int ps_index = 0;
  int worker_index = 0;
  std::string host = "127.0.0.1";
};
Job local_job(const LocalFlags& flags);

// This task's offset from the first port of a local job (ps i: i, master: ps_count, ...), used to
// give every local process its own metrics port.
int local_port_offset(const Job& job);

}  // namespace cifar::cluster
