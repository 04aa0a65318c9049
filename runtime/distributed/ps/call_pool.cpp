#include "distributed/ps/call_pool.h"

#include <utility>

namespace cifar::ps {

CallPool::~CallPool() {
  {
    const std::lock_guard lock(mu_);
    stopping_ = true;
  }
  ready_.notify_all();
  for (auto& t : threads_) t.join();
}

void CallPool::run(std::function<void()> call) {
  const std::lock_guard lock(mu_);
  queue_.push_back(std::move(call));
  if (idle_ < queue_.size()) {
    threads_.emplace_back([this] { serve(); });
  } else {
    ready_.notify_one();
  }
}

void CallPool::serve() {
  std::unique_lock lock(mu_);
  while (true) {
    ++idle_;
    ready_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    --idle_;
    if (queue_.empty()) return;  // stopping, nothing left to run
    auto call = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    call();
    lock.lock();
  }
}

}  // namespace cifar::ps
