// A collective that failed because another rank died or stopped answering: the group is broken,
// and the ranks that are left form a new one with the lost rank's replacement (rendezvous.h)
// instead of exiting.
#pragma once

#include <stdexcept>

namespace cifar::allreduce {

class PeerLost : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// An elastic job's ranks agreed at a step boundary that their group must form again (ranks wait
// to join it, or its store moved on): the group is left whole, each rank holding that step, for
// the next round.
class ReformGroup : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace cifar::allreduce
