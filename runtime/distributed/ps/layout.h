// How a model's trainable parameters are spread over the PS shards: balanced by bytes (largest
// tensors first, each shard the same share within one element), and a tensor larger than a share
// is split across shards so that none becomes the hot spot. A pure function of (names, sizes,
// shard count): every process of a job computes the same layout.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/ps_options.h"

namespace cifar::ps {

struct ParameterInfo {
  std::string name;
  int64_t numel = 0;
};

// A contiguous range of one parameter's flattened elements, held by one shard.
struct Piece {
  int parameter = 0;  // index into the layout's parameters
  int64_t offset = 0;
  int64_t length = 0;
  int shard = 0;
  uint32_t key = 0;  // index within the shard, in (parameter, offset) order
};

// How many stripes each PS process serves its share as. A stripe is a shard of its own on a
// connection of its own, so that one PS's transfers, updates and copies overlap instead of running
// in sequence on one connection (gRPC handles a connection's bytes on one thread at a time): one
// stripe per kStripeBytes of a server's share, at most kMaxStripes (config/ps_options.h), unless
// `requested` (the job's --ps-stripes, 1 to kMaxStripes; 0: the size rule) says otherwise. The
// layout then has `servers x stripes` shards, shard s on server s / stripes. A pure function of
// the sizes and the job's flags, so every process of a job (and a PS restoring from a checkpoint)
// computes the same.
// 256 KiB: on 16 cores resnet20's 1.1 MB round trip is fastest in four stripes; on two cores
// two stripes would do better (docs/BENCHMARKS.md 4), which --ps-stripes 2 gives.
constexpr int64_t kStripeBytes = int64_t{256} << 10;
int stripes_per_server(const std::vector<ParameterInfo>& parameters, int servers,
                       int requested = 0);

class ShardLayout {
 public:
  ShardLayout(std::vector<ParameterInfo> parameters, int shards);

  [[nodiscard]] int shards() const { return shards_; }
  [[nodiscard]] const std::vector<ParameterInfo>& parameters() const { return parameters_; }
  [[nodiscard]] const std::vector<Piece>& pieces(int shard) const;
  [[nodiscard]] int64_t elements(int shard) const;
  // Identifies (names, sizes, shard count); members of a job must agree on it.
  [[nodiscard]] uint64_t fingerprint() const { return fingerprint_; }

 private:
  std::vector<ParameterInfo> parameters_;
  int shards_;
  std::vector<std::vector<Piece>> by_shard_;
  uint64_t fingerprint_ = 0;
};

}  // namespace cifar::ps
