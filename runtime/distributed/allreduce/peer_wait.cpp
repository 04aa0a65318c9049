#include "distributed/allreduce/peer_wait.h"

#include <fmt/format.h>

#include <algorithm>
#include <exception>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include "distributed/allreduce/peer_lost.h"
#include "distributed/allreduce/process_group.h"
#include "health/waits.h"
#include "train/error_text.h"

namespace cifar::allreduce {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// How often a wait asks whether a peer went silent. Work::wait returns as soon as the work
// completes, so a slice costs a step nothing.
constexpr milliseconds kSlice{500};

[[noreturn]] void lost(const c10d::ProcessGroup& group, const PeerWait& wait,
                       const std::string& what, const std::string& why) {
  throw PeerLost(
      what + " failed (rank " + std::to_string(group.getRank()) + " of " +
      std::to_string(group.getSize()) + "): " + why +
      fmt::format(" (--dist-timeout {:g} s)", static_cast<double>(wait.timeout.count()) / 1000));
}

}  // namespace

void wait_for_peers(const c10d::ProcessGroup& group, const c10::intrusive_ptr<c10d::Work>& work,
                    const PeerWait& wait, const std::string& what) {
  // Outside the tries: only the collective's failure means a lost peer.
  const health::Wait in_flight(what, describe_peers(group));
  const auto deadline = Clock::now() + wait.timeout;
  while (true) {
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
    const auto longest = wait.silent_peer ? kSlice : std::max(wait.timeout, milliseconds(1));
    const auto slice = std::clamp(left, milliseconds(1), longest);
    try {
      work->wait(slice);
      return;
    } catch (const std::exception&) {
      // A slice that ran out leaves the work as it was (c10d's Work::wait only throws); one that
      // completed meanwhile, or failed, is waited for once more for its outcome.
      if (work->isCompleted()) {
        try {
          work->wait(slice);
          return;
        } catch (const std::exception& failed) {
          lost(group, wait, what,
               "another rank died or did not answer: " + train::error_text(failed));
        }
      }
      if (Clock::now() >= deadline) {
        lost(group, wait, what, "another rank died or did not answer within the timeout");
      }
    }
    if (!wait.silent_peer) continue;  // the timeout's slice ended a little early
    if (const auto silent = wait.silent_peer()) lost(group, wait, what, *silent);
  }
}

}  // namespace cifar::allreduce
