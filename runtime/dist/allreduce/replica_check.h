// Checks that every rank holds bit-identical parameters and buffers: data parallelism is only
// correct while the replicas never drift apart, and a drift (a non-deterministic kernel, a rank
// that skipped an update) is otherwise invisible until accuracy suffers.
#pragma once

#include <c10/util/intrusive_ptr.h>
#include <torch/types.h>

#include <chrono>
#include <cstdint>
#include <vector>

namespace c10d {
class ProcessGroup;
}

namespace cifar::allreduce {

// A 64-bit digest of the tensors' bytes (shape and dtype included), in order. Equal digests for
// bitwise-equal tensors; any flipped bit changes it (with overwhelming probability).
uint64_t bitwise_digest(const std::vector<torch::Tensor>& tensors);

// Collective: every rank must call it with its own replica's tensors. All ranks learn whether
// the digests agree (one all-reduce of max and -min), so all of them throw together, a
// std::runtime_error naming the step, instead of some hanging in the next collective.
void verify_replicas(c10d::ProcessGroup& group, const std::vector<torch::Tensor>& tensors,
                     int64_t step, std::chrono::milliseconds timeout);

}  // namespace cifar::allreduce
