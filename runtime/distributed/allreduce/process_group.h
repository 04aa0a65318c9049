// A c10d process group for this rank on a store every rank shares (a round of rendezvous.h):
// ProcessGroupGloo (CPU tensors) or ProcessGroupNCCL (CUDA tensors, when LibTorch has it).
#pragma once

#include <c10/util/intrusive_ptr.h>

#include <string>

#include "config/allreduce_options.h"

namespace c10d {
class ProcessGroup;
class Store;
}  // namespace c10d

namespace cifar::allreduce {

// "auto" -> "nccl" on cuda, "gloo" otherwise; throws std::invalid_argument for nccl without
// CUDA (or a LibTorch built without it).
Backend resolve_backend(Backend requested, const std::string& device);

// Whom a collective of `group` waits for, for a stall report: "rank 0's group: the other 3 ranks".
std::string describe_peers(const c10d::ProcessGroup& group);

// Blocks until every rank's backend has connected to every other's (up to the store's timeout);
// throws when one does not.
c10::intrusive_ptr<c10d::ProcessGroup> make_process_group(
    const c10::intrusive_ptr<c10d::Store>& store, const Options& options, Backend backend);

}  // namespace cifar::allreduce
