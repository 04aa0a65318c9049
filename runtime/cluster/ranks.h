// Who is who in an all-reduce job: this process's rank, the world size and where rank 0's c10d
// store listens, from (in this order) the PyTorch env (MASTER_ADDR, MASTER_PORT, WORLD_SIZE,
// RANK, LOCAL_RANK), TF_CONFIG's master and workers, or mpirun's OMPI_COMM_WORLD_* env.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "cluster/cluster.h"
#include "contract/ports.h"

namespace cifar::cluster {

struct Ranks {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = contract::kC10dStorePort.number;
};

// Reads an environment variable (null when unset); std::getenv in production, a map in tests.
using EnvLookup = std::function<const char*(const char*)>;

// The ranks from the env, or nullopt when none of the three sources is there. `tf_job` is the
// parsed TF_CONFIG, if any: rank 0 is the master (or worker 0 without one), workers follow in
// order, and the store is on rank 0's host at MASTER_PORT or 29500. Throws std::invalid_argument
// naming the variable for values that are not numbers or out of range.
std::optional<Ranks> ranks_from_env(const EnvLookup& env, const std::optional<Job>& tf_job);

}  // namespace cifar::cluster
