// Keeping the ranks' replicas of the model identical: rank 0's tensors broadcast to all, and a
// check that every rank holds bit-identical parameters and buffers. Data parallelism is only
// correct while the replicas never drift apart, and a drift (a non-deterministic kernel, a rank
// that skipped an update, buffers updated from each rank's own batch) is otherwise invisible
// until accuracy suffers.
#pragma once

#include <c10/util/intrusive_ptr.h>
#include <torch/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "distributed/allreduce/peer_wait.h"

namespace c10d {
class ProcessGroup;
}

namespace cifar::allreduce {

// Collective: makes every rank's `tensors` equal to rank `root`'s, one broadcast per dtype (the
// tensors flattened into one buffer). Throws PeerLost as `wait` says (peer_wait.h).
void broadcast_coalesced(c10d::ProcessGroup& group, const std::vector<torch::Tensor>& tensors,
                         const PeerWait& wait, int root = 0);

// Collective: every rank gets rank `root`'s `bytes` (of any length, none included); the others'
// are ignored.
std::string broadcast_bytes(c10d::ProcessGroup& group, const std::string& bytes,
                            const PeerWait& wait, int root = 0);

// Collective: the lowest rank among those whose `step` is the largest, or -1 where every rank's
// is negative: which rank holds the newest state, to hand it to the others.
int holder_of_newest(c10d::ProcessGroup& group, int64_t step, const PeerWait& wait);

// A 64-bit digest of the tensors' bytes (shape and dtype included), in order. Equal digests for
// bitwise-equal tensors; any flipped bit changes it (with overwhelming probability).
uint64_t bitwise_digest(const std::vector<torch::Tensor>& tensors);

// Collective: every rank must call it with its own replica's tensors. All ranks learn whether
// the digests agree (one all-reduce of max and -min), so all of them throw together, a
// std::runtime_error naming the step, instead of some hanging in the next collective.
void verify_replicas(c10d::ProcessGroup& group, const std::vector<torch::Tensor>& tensors,
                     int64_t step, const PeerWait& wait);

}  // namespace cifar::allreduce
