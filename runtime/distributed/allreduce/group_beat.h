// An elastic job's group, beating at its rendezvous store (rendezvous.h) from a thread of each of
// its ranks, once a second, while the group lasts: a rank waiting to join takes a group that
// stopped beating for gone, however long a step, an evaluation or a data load takes. The same
// thread reads what calls for the group to form again (ranks waiting to join, the store moved on
// to a later round, or a new store), so that the training loop asks a flag, not the store.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

#include "config/allreduce_options.h"

namespace cifar::allreduce {

class GroupBeat {
 public:
  // The group of `round` at the store whose id is `store_id` (at options' master address).
  GroupBeat(Options options, std::string store_id, int64_t round);
  ~GroupBeat();
  GroupBeat(const GroupBeat&) = delete;
  GroupBeat& operator=(const GroupBeat&) = delete;

  // Whether the group must form again (read at a step boundary).
  [[nodiscard]] bool must_reform() const { return must_reform_.load(); }

 private:
  void run();

  Options options_;
  std::string store_id_;
  int64_t round_;
  std::atomic<bool> must_reform_{false};
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;  // last: started once the rest is set
};

}  // namespace cifar::allreduce
