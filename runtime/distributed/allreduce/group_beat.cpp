#include "distributed/allreduce/group_beat.h"

#include <spdlog/spdlog.h>

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

GroupBeat::GroupBeat(Options options, std::string store_id, int64_t round)
    : options_(std::move(options)),
      store_id_(std::move(store_id)),
      round_(round),
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
        store = rendezvous_keys::connect_client(options_.master_addr, options_.master_port,
                                                kStoreTimeout);
      }
      store->add(rendezvous_keys::alive(round_), 1);
      const bool waiting = store->add(rendezvous_keys::waiting(round_), 0) > 0;
      const bool moved_on = rendezvous_keys::number_at(*store, rendezvous_keys::kRound) != round_;
      const bool new_store =
          rendezvous_keys::text(store->get(rendezvous_keys::kStoreId)) != store_id_;
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

}  // namespace cifar::allreduce
