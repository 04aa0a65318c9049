// Threads for calls that may block for long. The server runs PushPull on them: a sync round holds
// each trainer's call until every trainer has pushed, which must not happen on gRPC's callback
// threads (they would all be held by the first trainers, and the last trainer's push would never
// be read). The client runs its calls to several shards on them. A call gets an idle thread, or a
// new one when none is idle; threads are reused and joined on destruction.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace cifar::ps {

class CallPool {
 public:
  CallPool() = default;
  ~CallPool();
  CallPool(const CallPool&) = delete;
  CallPool& operator=(const CallPool&) = delete;

  void run(std::function<void()> call);

 private:
  void serve();

  std::mutex mu_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> queue_;
  size_t idle_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace cifar::ps
