// The stall watchdog: a thread that reads the heartbeat (heartbeat.h) once a second and, when the
// process made no progress for longer than its limit, takes a stall report (stall_report.h): to
// the log, to a file, and in one line to a callback (the pod's termination message). One report
// per stall; progress again re-arms it. It only reports: the operator decides what to do.
//
// The limit: --stall-seconds when given; else max(kStallFloorSeconds, kStallIntervals x the
// longest gap between two progress marks so far). The floor covers what is no step (evaluation, a
// checkpoint save) until the run has shown its own pace. Until the first step (and the first after
// an expected quiet) the limit is at least the start-up floor (--stall-startup-seconds, by default
// kStallFloorSeconds): loading the data, forming the group, restoring a checkpoint are no steps.
//
// Taking the report never blocks on what the stalled threads hold: the heartbeat's and the wait
// table's locks are held only for copies; the stacks are walked by each thread in a signal
// handler (thread_stacks.h).
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "health/heartbeat.h"

namespace cifar::health {

inline constexpr double kStallFloorSeconds = 300;
inline constexpr double kStallIntervals = 10;

struct StallLimit {
  double seconds = 0;
  std::string rule;  // for the report: how the limit was set
};
// `configured` > 0: that; 0: derived from the progress seen (the rule above); at least
// `startup_floor` while the process is starting.
[[nodiscard]] StallLimit stall_limit(double configured, double startup_floor,
                                     const ProgressState& progress);

// What the process's watchdog says now, for its metrics (the operator reads them): the limit it
// applies (0: no watchdog runs), and the summary of the stall it reported while that stall lasts
// ("" when none, or once progress came again).
struct StallStatus {
  double limit_seconds = 0;
  std::string summary;
};
[[nodiscard]] StallStatus stall_status();

struct WatchdogOptions {
  std::string who;                              // "worker 1", "rank 0": named in the report
  double stall_seconds = 0;                     // 0: derived
  double startup_seconds = kStallFloorSeconds;  // the floor until the first step
  std::string report_dir;                       // a report file goes here (empty: none)
  std::function<void(const std::string& summary)> on_stall;  // the one-line form
  std::function<bool()> standing_down;  // true during a graceful stop: no stall then
  std::chrono::milliseconds poll = std::chrono::seconds(1);
};

class StallWatchdog {
 public:
  explicit StallWatchdog(WatchdogOptions options);
  ~StallWatchdog();
  StallWatchdog(const StallWatchdog&) = delete;
  StallWatchdog& operator=(const StallWatchdog&) = delete;
  StallWatchdog(StallWatchdog&&) = delete;
  StallWatchdog& operator=(StallWatchdog&&) = delete;

 private:
  void watch();
  // Takes the report; returns its summary.
  std::string report(const ProgressState& progress, const StallLimit& limit);

  WatchdogOptions options_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool ending_ = false;
  std::thread thread_;
};

}  // namespace cifar::health
