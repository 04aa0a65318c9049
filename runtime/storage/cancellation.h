// Makes the store requests of one thread give up: a background upload that nobody waits for any
// more (train/background_writer.h, when its process ends) stops within a second, instead of
// riding out an outage for minutes on a thread that would outlive main().
//
// The owner of the thread keeps a Cancellation; the thread puts it in force for its requests with
// a CancelRequestsOnThisThread. Requests then end in storage::Cancelled once it is cancelled: a
// retry's wait (retrying_store.h, s3_client.h) is cut short, and a transfer in progress is aborted
// by curl's progress callback (called at least once a second).
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <string>

namespace cifar::storage {

// A request given up because the one who wanted it no longer does.
class Cancelled : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Cancellation {
 public:
  void cancel();
  [[nodiscard]] bool cancelled() const;
  // Sleeps for `duration`, or less if cancel() comes first; whether it came.
  bool sleep_for(std::chrono::milliseconds duration) const;

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable cancelled_cv_;
  bool cancelled_ = false;
};

// While it lives, the store requests of the thread that made it answer to `cancellation`.
class CancelRequestsOnThisThread {
 public:
  explicit CancelRequestsOnThisThread(const Cancellation& cancellation);
  ~CancelRequestsOnThisThread();
  CancelRequestsOnThisThread(const CancelRequestsOnThisThread&) = delete;
  CancelRequestsOnThisThread& operator=(const CancelRequestsOnThisThread&) = delete;

 private:
  const Cancellation* previous_;
};

// The cancellation this thread's requests answer to; nullptr: none (they are never cancelled).
const Cancellation* requests_cancellation();

// Whether this thread's requests are cancelled (cheap: no lock when there is no cancellation).
bool requests_cancelled();

// Throws Cancelled saying that `what` (a request) was given up.
[[noreturn]] void throw_cancelled(const std::string& what);

// Waits before a retry: `duration`, less if this thread's requests are cancelled meanwhile (then
// throws Cancelled).
void wait_before_retry(std::chrono::milliseconds duration, const std::string& what);

}  // namespace cifar::storage
