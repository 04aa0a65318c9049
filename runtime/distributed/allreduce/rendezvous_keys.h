// The keys of the rendezvous rounds in the c10d store (rendezvous.h, group_beat.h), reading and
// writing them as text, and a client's connection to the store.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <string>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <vector>

namespace cifar::allreduce::rendezvous_keys {

inline const std::string kStoreId = "rdzv/store";  // which store this is: a new one starts over
inline const std::string kRound = "rdzv/round";    // the round ranks join now

inline std::string of_round(int64_t round, const char* what) {
  return "rdzv/" + std::to_string(round) + "/" + what;
}
inline std::string joined(int64_t round) { return of_round(round, "joined"); }
// How many ranks a round closed with: written once (compare-and-set), read by all.
inline std::string closed(int64_t round) { return of_round(round, "closed"); }
// Elastic jobs: ranks that came after the round closed, and its group's beats.
inline std::string waiting(int64_t round) { return of_round(round, "waiting"); }
inline std::string alive(int64_t round) { return of_round(round, "alive"); }
// One rank's beats in the group of `round` (its place in the group).
inline std::string beat(int64_t round, int rank) {
  return of_round(round, "beat/") + std::to_string(rank);
}

// A new store's id, "<ms>@<pid>": the wall-clock millisecond it started at and its process, so
// that a store started later (a new rendezvous-store pod) has rounds that come after the old one's.
inline std::string new_store_id(int64_t started_ms, int64_t pid) {
  return std::to_string(started_ms) + "@" + std::to_string(pid);
}

// Round `round` of the store `store_id` as one number that only grows: a store's rounds in order,
// and a later store's above them all (the start time in the high bits, the round in the low 20).
// An elastic job's chief claims the run's fence with it (train/fence.h): its rank 0 moves from
// round to round, and a rank 0 of an older round must write nothing once a newer one took over.
// Good while a job has fewer than 2^20 rounds a store and for start times until the year 2248; an
// id without a start time (another version's) counts as a store started at 0.
inline constexpr int kRoundBits = 20;
inline int64_t generation(const std::string& store_id, int64_t round) {
  const auto at = store_id.find('@');
  int64_t started_ms = 0;
  try {
    if (at != std::string::npos) started_ms = std::stoll(store_id.substr(0, at));
  } catch (const std::exception&) {  // not a number: started at 0
  }
  return (started_ms << kRoundBits) | (round & ((int64_t{1} << kRoundBits) - 1));
}

inline std::vector<uint8_t> bytes(const std::string& text) { return {text.begin(), text.end()}; }
inline std::string text(const std::vector<uint8_t>& bytes) { return {bytes.begin(), bytes.end()}; }
inline int64_t number_at(c10d::Store& store, const std::string& key) {
  return std::stoll(text(store.get(key)));
}

// A new connection to the store at host:port (no rank hosts an elastic job's), each call on it
// waiting at most `timeout`.
inline c10::intrusive_ptr<c10d::Store> connect_client(const std::string& host, int port,
                                                      std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<uint16_t>(port);
  options.isServer = false;
  options.waitWorkers = false;  // the rounds count the ranks
  options.timeout = timeout;
  return c10::make_intrusive<c10d::TCPStore>(host, options);
}

}  // namespace cifar::allreduce::rendezvous_keys
