#include "distributed/ps/layout.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>

namespace cifar::ps {
namespace {

// FNV-1a: stable across processes and builds (std::hash is not).
class Fnv1a {
 public:
  void add(const void* data, size_t size) {
    const auto* bytes = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < size; ++i) {
      hash_ = (hash_ ^ bytes[i]) * 0x100000001b3ULL;
    }
  }
  [[nodiscard]] uint64_t value() const { return hash_; }

 private:
  uint64_t hash_ = 0xcbf29ce484222325ULL;
};

}  // namespace

ShardLayout::ShardLayout(std::vector<ParameterInfo> parameters, int shards)
    : parameters_(std::move(parameters)), shards_(shards), by_shard_(static_cast<size_t>(shards)) {
  if (shards <= 0) throw std::invalid_argument("a job needs at least one PS shard");
  int64_t total = 0;
  for (const auto& p : parameters_) {
    if (p.numel <= 0) throw std::invalid_argument("parameter " + p.name + " has no elements");
    total += p.numel;
  }
  // Lay the tensors end to end, largest first, and cut the line into `shards` equal ranges: each
  // shard holds the same number of bytes (within one element), a tensor that straddles a cut is
  // split across shards, and the many small tensors stay whole.
  std::vector<int> order(parameters_.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return parameters_[static_cast<size_t>(a)].numel > parameters_[static_cast<size_t>(b)].numel;
  });
  std::vector<Piece> pieces;
  int64_t line_position = 0;
  for (const int p : order) {
    const int64_t numel = parameters_[static_cast<size_t>(p)].numel;
    int64_t offset = 0;
    while (offset < numel) {
      const int64_t at = line_position + offset;
      // The shard whose range [s*total/shards, (s+1)*total/shards) holds position `at`.
      int shard = static_cast<int>(at * shards / total);
      while (shard + 1 < shards && (shard + 1) * total / shards <= at) ++shard;
      while (shard > 0 && shard * total / shards > at) --shard;
      const int64_t shard_end = (shard + 1) * total / shards;
      const int64_t length = std::min(numel - offset, shard_end - at);
      pieces.push_back({p, offset, length, shard, 0});
      offset += length;
    }
    line_position += numel;
  }
  std::sort(pieces.begin(), pieces.end(), [](const Piece& a, const Piece& b) {
    return a.parameter != b.parameter ? a.parameter < b.parameter : a.offset < b.offset;
  });
  for (auto& piece : pieces) {
    auto& list = by_shard_[static_cast<size_t>(piece.shard)];
    piece.key = static_cast<uint32_t>(list.size());
    list.push_back(piece);
  }

  Fnv1a hash;
  hash.add(&shards_, sizeof(shards_));
  for (const auto& p : parameters_) {
    hash.add(p.name.data(), p.name.size() + 1);  // with the terminator: "ab"+"c" != "a"+"bc"
    hash.add(&p.numel, sizeof(p.numel));
  }
  fingerprint_ = hash.value();
}

int stripes_per_server(const std::vector<ParameterInfo>& parameters, int servers, int requested) {
  if (servers <= 0) throw std::invalid_argument("a job needs at least one PS shard");
  if (requested < 0 || requested > kMaxStripes) {
    throw std::invalid_argument("--ps-stripes " + std::to_string(requested) +
                                ": a PS serves 1 to " + std::to_string(kMaxStripes) +
                                " stripes (0: one per " + std::to_string(kStripeBytes >> 10) +
                                " KiB of its share)");
  }
  if (requested > 0) return requested;
  int64_t bytes = 0;
  for (const auto& p : parameters) bytes += p.numel * static_cast<int64_t>(sizeof(float));
  const int64_t per_server = bytes / servers;
  return static_cast<int>(std::clamp<int64_t>(per_server / kStripeBytes, 1, kMaxStripes));
}

const std::vector<Piece>& ShardLayout::pieces(int shard) const {
  return by_shard_.at(static_cast<size_t>(shard));
}

int64_t ShardLayout::elements(int shard) const {
  int64_t sum = 0;
  for (const auto& p : pieces(shard)) sum += p.length;
  return sum;
}

}  // namespace cifar::ps
