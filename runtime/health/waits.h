// What the process is waiting on now, and what it waited on last: the PS calls, collectives,
// reads and saves in flight with their peers and ages, and a ring of the last ones finished (as
// PyTorch's Flight Recorder keeps the last collectives). A stall report lists them beside the
// threads' stacks. A Wait costs a lock held for a copy, never while waiting.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace cifar::health {

// RAII: registered for its lifetime. `what` says the operation ("PS push-pull (stripe 1)",
// "all-reduce of bucket 2"), `peer` whom it waits for ("ps-0:2222", "ranks 0-1"; may be empty).
class Wait {
 public:
  Wait(std::string what, std::string peer);
  ~Wait();
  Wait(const Wait&) = delete;
  Wait& operator=(const Wait&) = delete;
  Wait(Wait&&) = delete;
  Wait& operator=(Wait&&) = delete;

 private:
  int64_t id_;
};

struct WaitRecord {
  std::string what;
  std::string peer;
  pid_t thread = 0;
  double seconds = 0;    // in flight: its age; finished: how long it took
  double ended_ago = 0;  // finished ones: how long ago it ended
};
struct Waits {
  std::vector<WaitRecord> in_flight;  // oldest first
  std::vector<WaitRecord> finished;   // the newest last, up to kFinishedKept
};
inline constexpr int kFinishedKept = 16;
[[nodiscard]] Waits waits();

}  // namespace cifar::health
