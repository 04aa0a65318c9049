#include "distributed/allreduce/replicas.h"

#include <torch/csrc/utils/tensor_flatten.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

namespace cifar::allreduce {
namespace {

// boost::hash_combine's mixing, widened to 64 bits.
uint64_t combine(uint64_t seed, uint64_t value) {
  return seed ^ (value + 0x9e3779b97f4a7c15ULL + (seed << 6U) + (seed >> 2U));
}

}  // namespace

void broadcast_coalesced(c10d::ProcessGroup& group, const std::vector<torch::Tensor>& tensors,
                         const PeerWait& wait, int root) {
  torch::NoGradGuard no_grad;
  std::map<torch::ScalarType, std::vector<torch::Tensor>> by_dtype;
  for (const auto& t : tensors) by_dtype[t.scalar_type()].push_back(t);
  for (const auto& [dtype, same_dtype] : by_dtype) {
    std::vector<torch::Tensor> flat{torch::utils::flatten_dense_tensors(same_dtype)};
    c10d::BroadcastOptions options;
    options.rootRank = root;
    options.timeout = wait.timeout;
    wait_for_peers(group, group.broadcast(flat, options), wait, "broadcast");
    const auto received = torch::utils::unflatten_dense_tensors(flat[0], same_dtype);
    for (size_t i = 0; i < same_dtype.size(); ++i) same_dtype[i].copy_(received[i]);
  }
}

std::string broadcast_bytes(c10d::ProcessGroup& group, const std::string& bytes,
                            const PeerWait& wait, int root) {
  auto size = torch::tensor({static_cast<int64_t>(bytes.size())}, torch::kInt64);
  broadcast_coalesced(group, {size}, wait, root);
  const auto n = size.item<int64_t>();
  if (n == 0) return {};
  auto buffer = torch::empty({n}, torch::kUInt8);
  if (group.getRank() == root) std::memcpy(buffer.data_ptr(), bytes.data(), bytes.size());
  broadcast_coalesced(group, {buffer}, wait, root);
  return {static_cast<const char*>(buffer.data_ptr()), static_cast<size_t>(n)};
}

uint64_t bitwise_digest(const std::vector<torch::Tensor>& tensors) {
  uint64_t digest = tensors.size();
  for (const auto& tensor : tensors) {
    const auto host = tensor.detach().to(torch::kCPU).contiguous();
    digest = combine(digest, static_cast<uint64_t>(host.scalar_type()));
    for (const auto size : host.sizes()) digest = combine(digest, static_cast<uint64_t>(size));
    const std::string_view bytes(static_cast<const char*>(host.data_ptr()), host.nbytes());
    digest = combine(digest, std::hash<std::string_view>{}(bytes));
  }
  return digest;
}

int holder_of_newest(c10d::ProcessGroup& group, int64_t step, const PeerWait& wait) {
  // One maximum over (step + 1, then the complement of the rank) packed in an int64: the step
  // in the high bits, so that the largest step wins, and among equal steps the lowest rank.
  constexpr int kRankBits = 20;
  constexpr int64_t kRankMask = (int64_t{1} << kRankBits) - 1;
  const int64_t packed = ((std::max<int64_t>(step, -1) + 1) << kRankBits) |
                         (kRankMask - static_cast<int64_t>(group.getRank()));
  std::vector<torch::Tensor> buffer{torch::tensor({packed}, torch::kInt64)};
  c10d::AllreduceOptions options;
  options.reduceOp = c10d::ReduceOp::MAX;
  options.timeout = wait.timeout;
  wait_for_peers(group, group.allreduce(buffer, options), wait, "newest-state all-reduce");
  const auto newest = buffer[0].item<int64_t>();
  if ((newest >> kRankBits) == 0) return -1;  // every step negative: nobody holds a state
  return static_cast<int>(kRankMask - (newest & kRankMask));
}

void verify_replicas(c10d::ProcessGroup& group, const std::vector<torch::Tensor>& tensors,
                     int64_t step, const PeerWait& wait) {
  const auto digest = static_cast<int64_t>(bitwise_digest(tensors));
  // max(d) and max(~d) = ~min(d) (~ reverses the order, without overflow): equal extremes
  // mean every rank has the same digest.
  const auto extremes = torch::tensor({digest, ~digest}, torch::kInt64);
  std::vector<torch::Tensor> buffer{extremes};
  c10d::AllreduceOptions options;
  options.reduceOp = c10d::ReduceOp::MAX;
  options.timeout = wait.timeout;
  wait_for_peers(group, group.allreduce(buffer, options), wait, "replica check");
  const auto highest = extremes[0].item<int64_t>();
  const auto lowest = ~extremes[1].item<int64_t>();
  if (highest != lowest) {
    throw std::runtime_error(
        "replicas diverged after step " + std::to_string(step) + ": rank " +
        std::to_string(group.getRank()) + " of " + std::to_string(group.getSize()) +
        " has the parameters-and-buffers digest " + std::to_string(digest) +
        ", the ranks range from " + std::to_string(lowest) + " to " + std::to_string(highest) +
        " (a non-deterministic kernel or a rank that missed an update)");
  }
}

}  // namespace cifar::allreduce
