#include "storage/cancellation.h"

#include <string>
#include <thread>

namespace cifar::storage {
namespace {

thread_local const Cancellation* this_threads_cancellation = nullptr;

}  // namespace

void Cancellation::cancel() {
  const std::lock_guard guard(mu_);
  cancelled_ = true;
  cancelled_cv_.notify_all();
}

bool Cancellation::cancelled() const {
  const std::lock_guard guard(mu_);
  return cancelled_;
}

bool Cancellation::sleep_for(std::chrono::milliseconds duration) const {
  std::unique_lock lock(mu_);
  return cancelled_cv_.wait_for(lock, duration, [&] { return cancelled_; });
}

CancelRequestsOnThisThread::CancelRequestsOnThisThread(const Cancellation& cancellation)
    : previous_(this_threads_cancellation) {
  this_threads_cancellation = &cancellation;
}

CancelRequestsOnThisThread::~CancelRequestsOnThisThread() { this_threads_cancellation = previous_; }

const Cancellation* requests_cancellation() { return this_threads_cancellation; }

bool requests_cancelled() {
  return this_threads_cancellation != nullptr && this_threads_cancellation->cancelled();
}

void throw_cancelled(const std::string& what) {
  throw Cancelled(what + ": given up, nobody waits for it any more");
}

void wait_before_retry(std::chrono::milliseconds duration, const std::string& what) {
  if (this_threads_cancellation == nullptr) {
    std::this_thread::sleep_for(duration);
    return;
  }
  if (this_threads_cancellation->sleep_for(duration)) throw_cancelled(what);
}

}  // namespace cifar::storage
