#include "dist/ps/layout.h"

#include <algorithm>
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
  const int64_t fair_share = (total + shards - 1) / shards;

  // Split each tensor larger than a fair share into near-equal chunks no larger than it.
  std::vector<Piece> pieces;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    const int64_t numel = parameters_[i].numel;
    const int64_t chunks = (numel + fair_share - 1) / fair_share;
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t begin = numel * c / chunks;
      const int64_t end = numel * (c + 1) / chunks;
      pieces.push_back({static_cast<int>(i), begin, end - begin, 0, 0});
    }
  }
  // Largest first onto the least-loaded shard (ties: the lower index), a classic LPT schedule.
  std::stable_sort(pieces.begin(), pieces.end(),
                   [](const Piece& a, const Piece& b) { return a.length > b.length; });
  std::vector<int64_t> load(static_cast<size_t>(shards), 0);
  for (auto& piece : pieces) {
    const auto lightest = std::min_element(load.begin(), load.end()) - load.begin();
    piece.shard = static_cast<int>(lightest);
    load[static_cast<size_t>(lightest)] += piece.length;
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

const std::vector<Piece>& ShardLayout::pieces(int shard) const {
  return by_shard_.at(static_cast<size_t>(shard));
}

int64_t ShardLayout::elements(int shard) const {
  int64_t sum = 0;
  for (const auto& p : pieces(shard)) sum += p.length;
  return sum;
}

}  // namespace cifar::ps
