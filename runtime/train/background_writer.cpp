#include "train/background_writer.h"

#include <spdlog/spdlog.h>

#include <utility>

#include "storage/cancellation.h"

namespace cifar::train {

struct BackgroundWriter::State {
  explicit State(Commit c) : commit(std::move(c)) {}

  Commit commit;
  mutable std::mutex mu;
  std::condition_variable changed;
  std::optional<PendingWrite> waiting;  // behind the one being written
  std::optional<int64_t> writing_step;  // the one being written
  std::string writing_name;
  std::optional<int64_t> saved_step;
  std::exception_ptr failure;
  bool closing = false;
  storage::Cancellation cancellation;  // of the write in progress, once closing and overdue

  void raise_if_failed_locked() const {
    if (failure) std::rethrow_exception(failure);
  }
  [[nodiscard]] bool settled() const { return failure || (!waiting && !writing_step); }
};

BackgroundWriter::BackgroundWriter(Commit commit, OnClose on_close)
    : on_close_(on_close),
      state_(std::make_unique<State>(std::move(commit))),
      thread_([state = state_.get()] { run(*state); }) {}

BackgroundWriter::~BackgroundWriter() {
  {
    std::unique_lock lock(state_->mu);
    state_->closing = true;
    if (on_close_ == OnClose::kDropWaiting) state_->waiting.reset();
    state_->changed.notify_all();
    const bool finished =
        state_->changed.wait_for(lock, kGraceOnClose, [&] { return state_->settled(); });
    if (!finished) {
      spdlog::warn("{} not written: its writer closes, and gave the write {} s more",
                   state_->writing_step ? state_->writing_name : state_->waiting->name,
                   kGraceOnClose.count());
      state_->waiting.reset();
      state_->cancellation.cancel();
    }
  }
  thread_.join();
}

void BackgroundWriter::run(State& state) {
  const storage::CancelRequestsOnThisThread cancellable(state.cancellation);
  std::unique_lock lock(state.mu);
  while (true) {
    state.changed.wait(lock, [&] { return state.waiting || state.closing; });
    if (!state.waiting) return;  // closing, nothing left
    auto write = std::move(*state.waiting);
    state.waiting.reset();
    state.writing_step = write.step;
    state.writing_name = write.name;
    lock.unlock();
    std::exception_ptr failure;
    try {
      state.commit(write);
    } catch (...) {
      failure = std::current_exception();
    }
    lock.lock();
    state.writing_step.reset();
    if (failure) {
      state.failure = failure;
      state.waiting.reset();
    } else {
      state.saved_step = write.step;
    }
    state.changed.notify_all();
    if (failure) return;
  }
}

void BackgroundWriter::submit(PendingWrite write) {
  const std::lock_guard guard(state_->mu);
  state_->raise_if_failed_locked();
  state_->waiting = std::move(write);
  state_->changed.notify_all();
}

void BackgroundWriter::wait_until_saved() {
  std::unique_lock lock(state_->mu);
  state_->changed.wait(
      lock, [&] { return state_->failure || (!state_->waiting && !state_->writing_step); });
  state_->raise_if_failed_locked();
}

bool BackgroundWriter::wait_until_saved(std::chrono::milliseconds at_most) {
  std::unique_lock lock(state_->mu);
  const bool done = state_->changed.wait_for(lock, at_most, [&] { return state_->settled(); });
  state_->raise_if_failed_locked();
  return done;
}

void BackgroundWriter::raise_if_failed() {
  const std::lock_guard guard(state_->mu);
  state_->raise_if_failed_locked();
}

std::optional<int64_t> BackgroundWriter::saved_step() const {
  const std::lock_guard guard(state_->mu);
  return state_->saved_step;
}

std::optional<int64_t> BackgroundWriter::unsaved_step() const {
  const std::lock_guard guard(state_->mu);
  if (state_->waiting) return state_->waiting->step;
  return state_->writing_step;
}

}  // namespace cifar::train
