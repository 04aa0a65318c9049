// A graceful stop. Kubernetes interrupts a pod (a drain, a Kueue preemption, a suspend, a deleted
// job) with SIGTERM and kills it terminationGracePeriodSeconds later. While a run can save its
// state (a StopWindow is open: the training run from its first step, an all-reduce rank waiting
// with its state saved, an elastic all-reduce rank throughout, a PS serving its shards) the first
// SIGTERM or SIGINT only asks it to stop at its next step boundary, save, and exit with
// contract::kExitStopped. Outside a window there is
// nothing to save, and a second signal means "now": both exit at once with 128 + signal
// (checkpoints are atomic, nothing is torn).
#pragma once

#include <chrono>
#include <optional>

namespace cifar::train {

// main(): SIGTERM and SIGINT go through the graceful stop; SIGPIPE is ignored, so that a write to
// a peer that died (a killed rank's socket) fails with an error the run reports, not a signal.
void install_stop_handlers();

// Whether a stop was asked for (by a signal in an open window).
[[nodiscard]] bool stop_requested();
// How long ago the stop was asked for; empty when it was not.
[[nodiscard]] std::optional<std::chrono::duration<double>> time_since_stop_request();

// While one is alive, a first SIGTERM or SIGINT is a request to stop (stop_requested()), not an
// exit. Windows nest (a count).
class StopWindow {
 public:
  StopWindow();
  ~StopWindow();
  StopWindow(const StopWindow&) = delete;
  StopWindow& operator=(const StopWindow&) = delete;
  StopWindow(StopWindow&&) = delete;
  StopWindow& operator=(StopWindow&&) = delete;
};

}  // namespace cifar::train
