// A process's heartbeat of real progress: a trainer's step finished, a PS's update applied, a
// test batch evaluated. The stall watchdog (watchdog.h) and the metric
// cifar_seconds_since_progress read it. A wait that is no stall (an all-reduce rank waiting for
// its group, the evaluator waiting for the next checkpoint) is an ExpectedQuiet: while one is open
// the process counts as progressing.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace cifar::health {

// Marks progress now. Lock-free: a PS marks every update, from every serving thread.
void note_progress();

struct ProgressState {
  double seconds_since_progress = 0;  // 0 while quiet; since the heartbeat began if no mark yet
  int64_t progress_marks = 0;         // how many note_progress() so far
  double longest_interval = 0;        // the longest gap between two marks so far (seconds)
  // Starting: no mark yet, or none since the last quiet ended (an all-reduce round's setup after
  // its group formed); start-up work (data, model, connections) is no step.
  bool starting = true;
  std::string quiet_because;  // the newest open ExpectedQuiet's reason, or empty
};
[[nodiscard]] ProgressState progress_state();

// The process itself was not running for `paused` (SIGSTOP, a suspended machine): that time is no
// stall of its own, so the clock since the last progress skips it.
void forgive_pause(std::chrono::steady_clock::duration paused);

// While alive, the process is waiting by design; it counts as progressing, and the clock of
// seconds since progress starts again when it ends (as a start: see ProgressState::starting).
class ExpectedQuiet {
 public:
  explicit ExpectedQuiet(std::string reason);
  ~ExpectedQuiet();
  ExpectedQuiet(const ExpectedQuiet&) = delete;
  ExpectedQuiet& operator=(const ExpectedQuiet&) = delete;
  ExpectedQuiet(ExpectedQuiet&&) = delete;
  ExpectedQuiet& operator=(ExpectedQuiet&&) = delete;

 private:
  std::string reason_;
};

}  // namespace cifar::health
