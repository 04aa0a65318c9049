#include "health/waits.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace cifar::health {

namespace {

using Clock = std::chrono::steady_clock;

struct Entry {
  std::string what;
  std::string peer;
  pid_t thread = 0;
  Clock::time_point began;
};
struct Finished {
  Entry entry;
  Clock::time_point ended;
};

struct Table {
  std::mutex mutex;
  int64_t next_id = 0;
  std::map<int64_t, Entry> in_flight;  // ids grow: oldest first
  std::deque<Finished> finished;
};

Table& table() {
  static Table waits;
  return waits;
}

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

Wait::Wait(std::string what, std::string peer) {
  Entry entry{std::move(what), std::move(peer), static_cast<pid_t>(::syscall(SYS_gettid)),
              Clock::now()};
  auto& waits = table();
  const std::lock_guard lock(waits.mutex);
  id_ = waits.next_id++;
  waits.in_flight.emplace(id_, std::move(entry));
}

Wait::~Wait() {
  auto& waits = table();
  const auto now = Clock::now();
  const std::lock_guard lock(waits.mutex);
  auto node = waits.in_flight.extract(id_);
  if (node.empty()) return;
  waits.finished.push_back({std::move(node.mapped()), now});
  if (waits.finished.size() > static_cast<size_t>(kFinishedKept)) waits.finished.pop_front();
}

Waits waits() {
  auto& all = table();
  const auto now = Clock::now();
  const std::lock_guard lock(all.mutex);
  Waits out;
  for (const auto& [id, e] : all.in_flight) {
    out.in_flight.push_back({e.what, e.peer, e.thread, seconds(now - e.began), 0});
  }
  for (const auto& f : all.finished) {
    out.finished.push_back({f.entry.what, f.entry.peer, f.entry.thread,
                            seconds(f.ended - f.entry.began), seconds(now - f.ended)});
  }
  return out;
}

}  // namespace cifar::health
