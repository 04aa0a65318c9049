// The all-reduce strategy's options (distributed/allreduce/), as the command line (cli/) fills
// them: who this rank is and how gradients are reduced. No torch, so the CLI compiles fast.
#pragma once

#include <cstdint>
#include <string>

#include "contract/enum_names.h"
#include "contract/ports.h"

namespace cifar::allreduce {

enum class Backend { kAuto, kGloo, kNccl };  // auto: nccl on cuda, else gloo
inline constexpr contract::EnumNames<Backend, 3> kBackendNames{{
    {"auto", Backend::kAuto},
    {"gloo", Backend::kGloo},
    {"nccl", Backend::kNccl},
}};

struct Options {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;                     // among the ranks on this machine (launch, mpirun)
  std::string master_addr = "127.0.0.1";  // rank 0's host: the c10d TCPStore
  int master_port = contract::kC10dStorePort.number;
  Backend backend = Backend::kAuto;
  double bucket_cap_mb = 25;
  double first_bucket_mb = 1;   // small, so the first all-reduce starts early in backward
  bool overlap = true;          // all-reduce buckets during backward (false: after it)
  double timeout_seconds = 60;  // a collective waiting longer fails: a rank died or hangs
  // How long a rank waits for every rank to join its group: at the start, and after a peer was
  // lost, for the lost rank's replacement (rendezvous.h).
  double rendezvous_timeout_seconds = 300;
  // An elastic job (min_world_size > 0): a round closes with any number of ranks from
  // min_world_size to world_size (its maximum), once no rank joined for `settle_seconds`; each
  // rank's place in a round is the order it joined in, and the store is a process of its own
  // (`cifar-train rendezvous-store`), not rank 0's (docs/ARCHITECTURE.md, "Elastic jobs").
  int min_world_size = 0;
  double settle_seconds = 3;
  int64_t verify_replicas_every = 0;  // steps between bitwise checks that ranks agree (0: never)
};

}  // namespace cifar::allreduce
