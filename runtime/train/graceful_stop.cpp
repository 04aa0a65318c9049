#include "train/graceful_stop.h"

#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdlib>

#include "contract/exit_codes.h"

namespace cifar::train {
namespace {

using Clock = std::chrono::steady_clock;

// Touched from the signal handler: lock-free atomics only.
std::atomic<int> g_open_windows{0};
std::atomic<bool> g_requested{false};
std::atomic<Clock::rep> g_requested_at{0};
static_assert(std::atomic<bool>::is_always_lock_free);
static_assert(std::atomic<int>::is_always_lock_free);
static_assert(std::atomic<Clock::rep>::is_always_lock_free);

void note_request() {
  g_requested_at.store(Clock::now().time_since_epoch().count());
  g_requested.store(true);
}

void on_stop_signal(int signal) {
  if (g_open_windows.load() > 0 && !g_requested.load()) {
    note_request();  // steady_clock::now is clock_gettime: async-signal-safe
    constexpr char kSaid[] = "stop requested: stopping at the next step boundary, saving first\n";
    [[maybe_unused]] const auto written = ::write(STDERR_FILENO, kSaid, sizeof(kSaid) - 1);
    return;
  }
  // No window (nothing to save), or the second signal: in a container cifar-train is PID 1, and
  // the kernel drops the signals PID 1 has no handler for, so the handler exits itself.
  std::_Exit(contract::kExitSignalBase + signal);
}

}  // namespace

void install_stop_handlers() {
  std::signal(SIGTERM, on_stop_signal);
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGPIPE, SIG_IGN);
}

bool stop_requested() { return g_requested.load(); }

std::optional<std::chrono::duration<double>> time_since_stop_request() {
  if (!g_requested.load()) return std::nullopt;
  const Clock::time_point at{Clock::duration{g_requested_at.load()}};
  return Clock::now() - at;
}

StopWindow::StopWindow() { g_open_windows.fetch_add(1); }
StopWindow::~StopWindow() { g_open_windows.fetch_sub(1); }

}  // namespace cifar::train
