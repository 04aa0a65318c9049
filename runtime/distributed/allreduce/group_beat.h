// An elastic job's group, beating at its rendezvous store (rendezvous.h) from a thread of each of
// its ranks, once a second, while the group lasts: a rank waiting to join takes a group that
// stopped beating for gone, however long a step, an evaluation or a data load takes. The same
// thread reads what calls for the group to form again (ranks waiting to join, the store moved on
// to a later round, or a new store), so that the training loop asks a flag, not the store, and
// each peer's own beats, so that a collective's wait (peer_wait.h) learns in seconds that a peer
// stopped: frozen, or cut off with its connections still open.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "config/allreduce_options.h"

namespace cifar::allreduce {

class GroupBeat {
 public:
  // The group of `round` at the store whose id is `store_id` (at options' master address), this
  // rank at `place` (its rank and world size in the group).
  GroupBeat(Options place, std::string store_id, int64_t round);
  ~GroupBeat();
  GroupBeat(const GroupBeat&) = delete;
  GroupBeat& operator=(const GroupBeat&) = delete;

  // Whether the group must form again (read at a step boundary).
  [[nodiscard]] bool must_reform() const { return must_reform_.load(); }

  // A peer whose beats stopped for kSilence while this rank read the store, said for an error
  // ("rank 2 of 3 has not beaten ..."); nullopt while all beat, or while the store does not
  // answer this rank either (then nothing is known of the peers: the collective's timeout rules).
  // Also said once the store this rank reaches is a new one (restarted: its pod replaced, say on
  // a node that died, perhaps with a peer): the group belongs to a store that is gone, so a
  // collective stuck on a lost peer ends at once, not after the silence the new store needs to
  // see, and the group forms again there. And once the store has moved on to a later round while
  // this rank waits (it was frozen or cut off, and the others left the group for another): their
  // old group's connections stay open until their processes end, so the wait would not.
  [[nodiscard]] std::optional<std::string> silent_peer() const;

  // How long a peer may not beat before it counts as gone: ten beats, room for a rank starved of
  // CPU for a few seconds.
  static constexpr std::chrono::seconds kSilence{10};

 private:
  using Clock = std::chrono::steady_clock;
  void run();
  // Records the peers' beat counts read at `now`.
  void heard(const std::vector<int64_t>& counts, Clock::time_point now);

  Options place_;
  std::string store_id_;
  int64_t round_;
  std::atomic<bool> must_reform_{false};
  std::atomic<bool> store_replaced_{false};
  std::atomic<int64_t> store_round_{-1};  // the store's round, as last read
  mutable std::mutex mutex_;
  std::vector<int64_t> beats_;                   // each rank's count, as last read
  std::vector<Clock::time_point> last_changed_;  // when each rank's count last moved
  Clock::time_point last_read_{};                // when this rank last read the store
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;  // last: started once the rest is set
};

}  // namespace cifar::allreduce
