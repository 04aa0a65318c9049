#include "cluster/ranks.h"

#include <stdexcept>

#include "contract/env.h"

namespace cifar::cluster {
namespace {

int parse_int(const char* name, const char* value, int min, int max) {
  try {
    size_t used = 0;
    const int n = std::stoi(value, &used);
    if (used == std::string(value).size() && n >= min && n <= max) return n;
  } catch (const std::exception&) {
    // reported below
  }
  throw std::invalid_argument(std::string(name) + "=\"" + value + "\" is not a number in [" +
                              std::to_string(min) + ", " + std::to_string(max) + "]");
}

int port_from(const EnvLookup& env) {
  const char* port = env(contract::env::kMasterPort);
  return port != nullptr ? parse_int(contract::env::kMasterPort, port, 1, 65535)
                         : contract::kC10dStorePort.number;
}

std::string host_of(const std::string& address) { return address.substr(0, address.rfind(':')); }

// Ranks from a (world size, rank, local rank) triple of variables, with MASTER_ADDR/MASTER_PORT.
std::optional<Ranks> from_variables(const EnvLookup& env, const char* world_var,
                                    const char* rank_var, const char* local_var) {
  const char* world = env(world_var);
  if (world == nullptr) return std::nullopt;
  const char* rank = env(rank_var);
  if (rank == nullptr) {
    throw std::invalid_argument(std::string(world_var) + " is set but " + rank_var + " is not");
  }
  Ranks r;
  r.world_size = parse_int(world_var, world, 1, 1 << 20);
  r.rank = parse_int(rank_var, rank, 0, r.world_size - 1);
  const char* local = env(local_var);
  r.local_rank = local != nullptr ? parse_int(local_var, local, 0, r.world_size - 1) : 0;
  const char* addr = env(contract::env::kMasterAddr);
  if (addr != nullptr && *addr != '\0') r.master_addr = addr;
  r.master_port = port_from(env);
  return r;
}

}  // namespace

std::optional<Ranks> ranks_from_env(const EnvLookup& env, const std::optional<Job>& tf_job) {
  if (auto r = from_variables(env, contract::env::kWorldSize, contract::env::kRank,
                              contract::env::kLocalRank)) {
    return r;
  }
  if (tf_job) {
    if (!tf_job->is_trainer()) {
      throw std::invalid_argument("TF_CONFIG: a " + std::string(role_name(tf_job->role)) +
                                  " task has no all-reduce rank");
    }
    Ranks r;
    r.world_size = tf_job->trainer_count();
    r.rank = tf_job->trainer_rank();
    const auto& c = tf_job->cluster;
    r.master_addr = host_of(c.master.empty() ? c.worker.at(0) : c.master.at(0));
    r.master_port = port_from(env);
    return r;
  }
  return from_variables(env, "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
                        "OMPI_COMM_WORLD_LOCAL_RANK");
}

}  // namespace cifar::cluster
