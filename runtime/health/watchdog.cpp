#include "health/watchdog.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>

#include "contract/flags.h"
#include "health/stall_report.h"
#include "health/thread_stacks.h"
#include "health/waits.h"

namespace cifar::health {

namespace {

using Clock = std::chrono::steady_clock;

// A poll this much later than asked for means the process itself was stopped meanwhile.
constexpr auto kPauseSlack = std::chrono::seconds(2);

// The watchdog's word for the metrics: written by its thread, read at scrapes.
std::mutex g_status_mutex;
StallStatus g_status;

void publish(StallStatus status) {
  const std::lock_guard lock(g_status_mutex);
  g_status = std::move(status);
}

}  // namespace

StallLimit stall_limit(double configured, double startup_floor, const ProgressState& progress) {
  const auto given = [&] {
    return StallLimit{configured,
                      fmt::format("{} {}", contract::flag::kStallSeconds.name, configured)};
  };
  if (progress.starting) {
    if (configured > startup_floor) return given();
    return {startup_floor,
            fmt::format("starting, no step yet: the start-up floor, {:.0f} s", startup_floor)};
  }
  if (configured > 0) return given();
  const double paced = kStallIntervals * progress.longest_interval;
  if (paced > kStallFloorSeconds) {
    return {paced, fmt::format("{:.0f} x the longest gap between progress marks, {:.1f} s",
                               kStallIntervals, progress.longest_interval)};
  }
  return {kStallFloorSeconds, fmt::format("the floor, {:.0f} s", kStallFloorSeconds)};
}

StallStatus stall_status() {
  const std::lock_guard lock(g_status_mutex);
  return g_status;
}

StallWatchdog::StallWatchdog(WatchdogOptions options)
    : options_(std::move(options)), thread_([this] { watch(); }) {}

StallWatchdog::~StallWatchdog() {
  {
    const std::lock_guard lock(mutex_);
    ending_ = true;
  }
  wake_.notify_all();
  thread_.join();
  publish({});
}

void StallWatchdog::watch() {
  int64_t reported_at_mark = -1;  // the progress marks when the last report was taken
  // The limit is on the metrics from the start: a scrape before the first poll reads it too.
  publish({stall_limit(options_.stall_seconds, options_.startup_seconds, progress_state()).seconds,
           ""});
  auto polled = Clock::now();
  std::unique_lock lock(mutex_);
  while (!wake_.wait_for(lock, options_.poll, [&] { return ending_; })) {
    const auto now = Clock::now();
    if (now - polled > options_.poll + kPauseSlack) forgive_pause(now - polled - options_.poll);
    polled = now;
    const auto progress = progress_state();
    const auto limit = stall_limit(options_.stall_seconds, options_.startup_seconds, progress);
    if (reported_at_mark >= 0 && progress.progress_marks != reported_at_mark) {
      spdlog::info("{}: progressing again after the stall reported", options_.who);
      reported_at_mark = -1;
    }
    if (reported_at_mark < 0) publish({limit.seconds, ""});
    if (reported_at_mark >= 0 || !progress.quiet_because.empty()) continue;
    if (options_.standing_down && options_.standing_down()) continue;
    if (progress.seconds_since_progress <= limit.seconds) continue;
    lock.unlock();
    std::string summary;
    try {
      summary = report(progress, limit);
    } catch (const std::exception& e) {  // a report that fails must not end the run
      spdlog::warn("{}: no progress for {:.0f} s, and the stall report failed: {}", options_.who,
                   progress.seconds_since_progress, e.what());
      summary = fmt::format("stalled: no progress for {:.0f} s (limit {:.0f} s)",
                            progress.seconds_since_progress, limit.seconds);
    }
    publish({limit.seconds, summary});
    lock.lock();
    reported_at_mark = progress.progress_marks;
  }
}

std::string StallWatchdog::report(const ProgressState& progress, const StallLimit& limit) {
  StallFacts facts{
      options_.who,   static_cast<int>(::getpid()), limit.seconds, limit.rule, progress, waits(),
      thread_stacks()};
  const auto text = format_stall_report(facts);
  auto summary = summarize_stall(facts);
  spdlog::error("{}: {}\n{}", options_.who, summary, text);
  // The summary before the file: the file may be on the volume that hangs. Not once the run is
  // over (its termination message is written).
  bool ending = false;
  {
    const std::lock_guard lock(mutex_);
    ending = ending_;
  }
  if (options_.on_stall && !ending) options_.on_stall(summary);
  if (options_.report_dir.empty()) return summary;
  // One file per report, named by who, when and which: never overwritten by a later one.
  static std::atomic<int> reports{0};
  std::error_code error;
  std::filesystem::create_directories(options_.report_dir, error);
  auto who = options_.who;
  std::replace(who.begin(), who.end(), ' ', '-');
  const auto path =
      std::filesystem::path(options_.report_dir) /
      fmt::format("{}-{}-{}.txt", who, static_cast<int64_t>(std::time(nullptr)), ++reports);
  std::ofstream file(path);
  file << text;
  if (file.flush()) {
    spdlog::info("stall report written to {}", path.string());
  } else {
    spdlog::warn("could not write the stall report to {}", path.string());
  }
  return summary;
}

}  // namespace cifar::health
