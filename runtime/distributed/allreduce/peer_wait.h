// How a rank waits for a collective of its group: up to the collective timeout (--dist-timeout)
// and, in an elastic job, no longer than until a peer stops beating at the rendezvous store
// (group_beat.h). A rank that was frozen (SIGSTOP) or cut off keeps its connections open, so
// Gloo sees nothing wrong until its timeout; its silence at the store shows in seconds.
#pragma once

#include <c10/util/intrusive_ptr.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>

namespace c10d {
class ProcessGroup;
class Work;
}  // namespace c10d

namespace cifar::allreduce {

struct PeerWait {
  std::chrono::milliseconds timeout{60000};
  // Which peer went silent, said for the error; nullopt while every peer beats. Empty: not asked
  // (a job of fixed size, whose lost ranks the operator replaces).
  std::function<std::optional<std::string>()> silent_peer;
};

// Waits for `work`, a collective of `group`; throws PeerLost saying that `what` failed when it
// failed (a peer died), did not complete within the timeout, or a peer went silent meanwhile.
void wait_for_peers(const c10d::ProcessGroup& group, const c10::intrusive_ptr<c10d::Work>& work,
                    const PeerWait& wait, const std::string& what);

}  // namespace cifar::allreduce
