#include "framework/work_queue.h"

#include <algorithm>
#include <cmath>

namespace cifar::op {

WorkQueue::WorkQueue(std::chrono::milliseconds base_delay, std::chrono::milliseconds max_delay)
    : base_delay_(base_delay), max_delay_(max_delay) {}

void WorkQueue::add(const std::string& key) {
  {
    const std::lock_guard lock(mu_);
    if (shut_down_) return;
    if (processing_.count(key) != 0) {
      dirty_.insert(key);  // handed out: queued again when done
      return;
    }
    if (!queued_.insert(key).second) return;
    queue_.push_back(key);
  }
  ready_.notify_one();
}

void WorkQueue::add_after(const std::string& key, std::chrono::milliseconds delay) {
  if (delay.count() <= 0) {
    add(key);
    return;
  }
  {
    const std::lock_guard lock(mu_);
    if (shut_down_) return;
    const auto due = Steady::now() + delay;
    const auto [entry, inserted] = due_.try_emplace(key, due);
    if (!inserted) {
      if (entry->second <= due) return;  // already due sooner
      delayed_.erase({entry->second, key});
      entry->second = due;
    }
    delayed_.emplace(due, key);
  }
  ready_.notify_all();  // a waiting get() must now wake up at the due time
}

void WorkQueue::add_rate_limited(const std::string& key) {
  std::chrono::milliseconds delay;
  {
    const std::lock_guard lock(mu_);
    const int n = failures_[key]++;
    const double factor = std::pow(2.0, std::min(n, 30));
    delay = std::min(max_delay_, std::chrono::milliseconds(static_cast<int64_t>(
                                     static_cast<double>(base_delay_.count()) * factor)));
  }
  add_after(key, delay);
}

void WorkQueue::forget(const std::string& key) {
  const std::lock_guard lock(mu_);
  failures_.erase(key);
}

int WorkQueue::failures(const std::string& key) const {
  const std::lock_guard lock(mu_);
  const auto it = failures_.find(key);
  return it == failures_.end() ? 0 : it->second;
}

void WorkQueue::promote_due_locked(Steady::time_point now) {
  while (!delayed_.empty() && delayed_.begin()->first <= now) {
    const auto key = delayed_.begin()->second;
    delayed_.erase(delayed_.begin());
    due_.erase(key);
    if (processing_.count(key) != 0) {
      dirty_.insert(key);
    } else if (queued_.insert(key).second) {
      queue_.push_back(key);
    }
  }
}

std::optional<std::string> WorkQueue::get() {
  std::unique_lock lock(mu_);
  while (true) {
    promote_due_locked(Steady::now());
    if (!queue_.empty()) break;
    if (shut_down_) return std::nullopt;
    if (delayed_.empty()) {
      ready_.wait(lock);
    } else {
      const auto due = delayed_.begin()->first;  // a copy: the entry may go while we wait
      ready_.wait_until(lock, due);
    }
  }
  auto key = queue_.front();
  queue_.pop_front();
  queued_.erase(key);
  processing_.insert(key);
  return key;
}

void WorkQueue::done(const std::string& key) {
  {
    const std::lock_guard lock(mu_);
    processing_.erase(key);
    if (dirty_.erase(key) == 0 || shut_down_) return;
    if (queued_.insert(key).second) queue_.push_back(key);
  }
  ready_.notify_one();
}

void WorkQueue::shut_down() {
  {
    const std::lock_guard lock(mu_);
    shut_down_ = true;
  }
  ready_.notify_all();
}

size_t WorkQueue::depth() const {
  const std::lock_guard lock(mu_);
  return queue_.size();
}

size_t WorkQueue::delayed_depth() const {
  const std::lock_guard lock(mu_);
  return delayed_.size();
}

}  // namespace cifar::op
