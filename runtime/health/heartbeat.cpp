#include "health/heartbeat.h"

#include <algorithm>
#include <atomic>
#include <iterator>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace cifar::health {

namespace {

using Clock = std::chrono::steady_clock;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

double seconds(int64_t ns) { return static_cast<double>(ns) / 1e9; }

// Marks are atomics (every PS update marks, from any serving thread); the quiet reasons, opened
// and closed a few times a run, are under a mutex that marks never take.
struct Heartbeat {
  std::atomic<int64_t> last_ns{now_ns()};  // the heartbeat's first use counts as a mark
  std::atomic<int64_t> marks{0};
  std::atomic<int64_t> longest_ns{0};
  std::atomic<bool> starting{true};
  std::atomic<int> quiet_open{0};
  std::mutex quiet_mutex;
  std::vector<std::string> quiet;  // open ExpectedQuiet reasons, oldest first
};

Heartbeat& heartbeat() {
  static Heartbeat beat;
  return beat;
}

}  // namespace

void note_progress() {
  auto& beat = heartbeat();
  const auto now = now_ns();
  const auto previous = beat.last_ns.exchange(now);
  beat.marks.fetch_add(1);
  // The gap before the first mark of a start is start-up (data, model, rendezvous), not a step.
  if (beat.starting.exchange(false)) return;
  auto longest = beat.longest_ns.load();
  while (now - previous > longest &&
         !beat.longest_ns.compare_exchange_weak(longest, now - previous)) {
  }
}

void forgive_pause(Clock::duration paused) {
  auto& beat = heartbeat();
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(paused).count();
  const auto now = now_ns();
  auto last = beat.last_ns.load();
  while (!beat.last_ns.compare_exchange_weak(last, std::min(now, last + ns))) {
  }
}

ProgressState progress_state() {
  auto& beat = heartbeat();
  ProgressState state;
  state.progress_marks = beat.marks.load();
  state.longest_interval = seconds(beat.longest_ns.load());
  state.starting = beat.starting.load();
  if (beat.quiet_open.load() > 0) {
    const std::lock_guard lock(beat.quiet_mutex);
    if (!beat.quiet.empty()) {
      state.quiet_because = beat.quiet.back();
      return state;
    }
  }
  state.seconds_since_progress = seconds(std::max<int64_t>(0, now_ns() - beat.last_ns.load()));
  return state;
}

ExpectedQuiet::ExpectedQuiet(std::string reason) : reason_(std::move(reason)) {
  auto& beat = heartbeat();
  const std::lock_guard lock(beat.quiet_mutex);
  beat.quiet.push_back(reason_);
  beat.quiet_open.fetch_add(1);
}

ExpectedQuiet::~ExpectedQuiet() {
  auto& beat = heartbeat();
  const std::lock_guard lock(beat.quiet_mutex);
  const auto it = std::find(beat.quiet.rbegin(), beat.quiet.rend(), reason_);
  if (it != beat.quiet.rend()) beat.quiet.erase(std::next(it).base());
  beat.quiet_open.fetch_sub(1);
  // The clock starts again from here, as at a start: the quiet time was no stall.
  beat.starting.store(true);
  beat.last_ns.store(now_ns());
}

}  // namespace cifar::health
