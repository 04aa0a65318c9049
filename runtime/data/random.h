// Small, fast, seedable random numbers whose results are fixed by this code alone: std::
// distributions are implementation-defined, which would break determinism across machines.
#pragma once

#include <cstdint>
#include <limits>

namespace cifar::data {

// splitmix64's finaliser: a strong 64-bit mix, used to derive independent seeds from keys.
constexpr uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30U)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27U)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31U);
}

// Hash of a key tuple, built one value at a time: hash_combine(hash_combine(mix64(seed), epoch),
// position). Order matters, so (a, b) and (b, a) give unrelated streams.
constexpr uint64_t hash_combine(uint64_t h, uint64_t value) { return mix64(h ^ mix64(value)); }

// xoshiro256**: a fast generator with 256 bits of state, seeded through splitmix64 as its authors
// recommend. Satisfies UniformRandomBitGenerator.
class Rng {
 public:
  using result_type = uint64_t;

  explicit Rng(uint64_t seed) {
    for (auto& word : state_) {
      seed += 0x9e3779b97f4a7c15ULL;
      word = mix64(seed - 0x9e3779b97f4a7c15ULL);
    }
  }

  static constexpr result_type min() { return 0; }
  static constexpr result_type max() { return std::numeric_limits<result_type>::max(); }

  result_type operator()() {
    const uint64_t result = rotl(state_[1] * 5, 7) * 9;
    const uint64_t t = state_[1] << 17U;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = rotl(state_[3], 45);
    return result;
  }

  // Uniform in [0, n), unbiased (rejects the short top range), n > 0.
  uint64_t below(uint64_t n) {
    const uint64_t threshold = (0 - n) % n;  // 2^64 mod n
    uint64_t r = (*this)();
    while (r < threshold) r = (*this)();
    return r % n;
  }

  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>((*this)() >> 11U) * 0x1.0p-53; }

 private:
  static constexpr uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t state_[4] = {};
};

}  // namespace cifar::data
