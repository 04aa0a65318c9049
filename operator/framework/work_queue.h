// A rate-limited work queue of object keys ("namespace/name"), as controller-runtime's: a key is
// queued at most once however often it is added, is never handed to two workers at once (added
// while in process, it is queued again when done), can be added after a delay, and failures are
// retried with per-key exponential backoff until forget() resets it. A key waits in the delayed
// set at most once: a second add_after keeps the earlier of the two times (client-go's delaying
// queue does the same), so the delayed set never holds more entries than there are keys.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "framework/clock.h"

namespace cifar::op {

class WorkQueue {
 public:
  explicit WorkQueue(std::chrono::milliseconds base_delay = std::chrono::milliseconds(5),
                     std::chrono::milliseconds max_delay = std::chrono::seconds(300));

  void add(const std::string& key);
  void add_after(const std::string& key, std::chrono::milliseconds delay);
  // After a failed attempt: again after base_delay * 2^(failures so far), at most max_delay.
  void add_rate_limited(const std::string& key);
  void forget(const std::string& key);  // after success: the next failure starts from base_delay
  [[nodiscard]] int failures(const std::string& key) const;

  // Blocks for the next key; empty once shut down (and drained of ready keys).
  std::optional<std::string> get();
  void done(const std::string& key);
  void shut_down();

  [[nodiscard]] size_t depth() const;          // keys waiting, not counting delayed ones
  [[nodiscard]] size_t delayed_depth() const;  // keys waiting for their time

 private:
  void promote_due_locked(Steady::time_point now);

  std::chrono::milliseconds base_delay_;
  std::chrono::milliseconds max_delay_;
  mutable std::mutex mu_;
  std::condition_variable ready_;
  std::deque<std::string> queue_;
  std::set<std::string> queued_;                                  // in queue_
  std::set<std::string> processing_;                              // handed out, not done
  std::set<std::string> dirty_;                                   // added while processing
  std::set<std::pair<Steady::time_point, std::string>> delayed_;  // by due time
  std::map<std::string, Steady::time_point> due_;                 // the same entries, by key
  std::map<std::string, int> failures_;
  bool shut_down_ = false;
};

}  // namespace cifar::op
