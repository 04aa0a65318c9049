// A c10d process group for this rank: rendezvous through the TCPStore on rank 0's host, then
// ProcessGroupGloo (CPU tensors) or ProcessGroupNCCL (CUDA tensors, when LibTorch has it).
#pragma once

#include <c10/util/intrusive_ptr.h>

#include <string>

#include "config/allreduce_options.h"

namespace c10d {
class ProcessGroup;
}

namespace cifar::allreduce {

// "auto" -> "nccl" on cuda, "gloo" otherwise; throws std::invalid_argument for nccl without
// CUDA (or a LibTorch built without it).
Backend resolve_backend(Backend requested, const std::string& device);

// Blocks until every rank has joined (up to options.timeout_seconds); throws std::runtime_error
// naming the store's address when they do not.
c10::intrusive_ptr<c10d::ProcessGroup> make_process_group(const Options& options, Backend backend);

}  // namespace cifar::allreduce
