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

}  // namespace cifar::allreduce
