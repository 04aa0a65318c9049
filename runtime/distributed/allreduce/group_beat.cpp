#include "distributed/allreduce/group_beat.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <utility>

#include "distributed/allreduce/rendezvous_keys.h"

namespace cifar::allreduce {
namespace {

constexpr auto kBeatEvery = std::chrono::seconds(1);
// The most a beat waits on the store: one that stopped answering is tried again next beat.
constexpr auto kStoreTimeout = std::chrono::milliseconds(1000);

}  // namespace

GroupBeat::GroupBeat(Options place, std::string store_id, int64_t round)
    : place_(std::move(place)),
      store_id_(std::move(store_id)),
      round_(round),
      beats_(static_cast<size_t>(place_.world_size), -1),
      last_changed_(static_cast<size_t>(place_.world_size), Clock::now()),
      thread_([this] { run(); }) {}

GroupBeat::~GroupBeat() {
  {
    const std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void GroupBeat::run() {
  c10::intrusive_ptr<c10d::Store> store;
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    lock.unlock();
    try {
      if (!store) {
        store =
            rendezvous_keys::connect_client(place_.master_addr, place_.master_port, kStoreTimeout);
      }
      store->add(rendezvous_keys::alive(round_), 1);
      store->add(rendezvous_keys::beat(round_, place_.rank), 1);
      std::vector<int64_t> counts;
      counts.reserve(static_cast<size_t>(place_.world_size));
      for (int rank = 0; rank < place_.world_size; ++rank) {
        counts.push_back(store->add(rendezvous_keys::beat(round_, rank), 0));
      }
      heard(counts, Clock::now());
      const bool waiting = store->add(rendezvous_keys::waiting(round_), 0) > 0;
      store_round_ = rendezvous_keys::number_at(*store, rendezvous_keys::kRound);
      const bool moved_on = store_round_ != round_;
      const bool new_store =
          rendezvous_keys::text(store->get(rendezvous_keys::kStoreId)) != store_id_;
      if (new_store) store_replaced_ = true;
      if (waiting || moved_on || new_store) must_reform_ = true;
    } catch (const std::exception& e) {
      // The group trains on without its store; a reply that came late must not be read as the
      // next one's: a new connection next beat.
      spdlog::debug("the rendezvous store did not answer a beat: {}", e.what());
      store.reset();
    }
    lock.lock();
    wake_.wait_for(lock, kBeatEvery, [this] { return stopping_; });
  }
}

void GroupBeat::heard(const std::vector<int64_t>& counts, Clock::time_point now) {
  const std::lock_guard lock(mutex_);
  if (now - last_read_ > 2 * kBeatEvery) {
    // This rank could not read the store for a while (nor, likely, could the others write it):
    // silence counts only across reads without a gap.
    std::fill(last_changed_.begin(), last_changed_.end(), now);
  }
  for (size_t rank = 0; rank < counts.size(); ++rank) {
    if (counts[rank] != beats_[rank]) {
      beats_[rank] = counts[rank];
      last_changed_[rank] = now;
    }
  }
  last_read_ = now;
}

std::optional<std::string> GroupBeat::silent_peer() const {
  if (store_replaced_) {
    return "the rendezvous store at " + place_.master_addr + ":" +
           std::to_string(place_.master_port) +
           " is a new one (restarted), which the group did not form at";
  }
  if (const int64_t now_at = store_round_; now_at > round_) {
    return "the store has moved on to round " + std::to_string(now_at) + ": the others left the " +
           "group of round " + std::to_string(round_) + " (this rank was frozen or cut off)";
  }
  const std::lock_guard lock(mutex_);
  const auto now = Clock::now();
  // This rank's own reads must be fresh: a store it cannot reach says nothing of the peers.
  if (now - last_read_ > 3 * kBeatEvery) return std::nullopt;
  for (size_t rank = 0; rank < last_changed_.size(); ++rank) {
    const auto silent = now - last_changed_[rank];
    if (static_cast<int>(rank) != place_.rank && silent > kSilence) {
      return "rank " + std::to_string(rank) + " of " + std::to_string(place_.world_size) +
             " has not beaten at the rendezvous store for " +
             std::to_string(std::chrono::duration_cast<std::chrono::seconds>(silent).count()) +
             " s (frozen, or cut off)";
    }
  }
  return std::nullopt;
}

}  // namespace cifar::allreduce
