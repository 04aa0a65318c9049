#include "distributed/allreduce/rendezvous.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <exception>
#include <stdexcept>
#include <thread>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <utility>

#include "distributed/allreduce/process_group.h"
#include "distributed/allreduce/rendezvous_keys.h"
#include "train/error_text.h"

namespace cifar::allreduce {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr auto kPoll = milliseconds(100);
// The longest a single try waits on the store (its connection, a key): a try that fails is
// retried until the rendezvous timeout, against a store that may since have been replaced.
constexpr auto kTryTimeout = milliseconds(30'000);
using rendezvous_keys::bytes;
using rendezvous_keys::number_at;
using rendezvous_keys::text;

milliseconds left_until(Clock::time_point deadline) {
  return std::max(milliseconds(1000),
                  std::chrono::duration_cast<milliseconds>(deadline - Clock::now()));
}

// The round after `round`, unless another rank moved on already; returns the store's round.
int64_t move_on_from(c10d::Store& store, int64_t round) {
  return std::stoll(text(store.compareSet(rendezvous_keys::kRound, bytes(std::to_string(round)),
                                          bytes(std::to_string(round + 1)))));
}

// A new store's identity (ranks that knew another start its rounds from the first) and round 0.
void initialise(c10d::Store& store) {
  const auto started =
      std::chrono::duration_cast<milliseconds>(std::chrono::system_clock::now().time_since_epoch());
  store.set(rendezvous_keys::kStoreId,
            bytes(rendezvous_keys::new_store_id(started.count(), ::getpid())));
  store.compareSet(rendezvous_keys::kRound, {}, bytes("0"));
}

// A round's prefix of the store whose waits last at most `bound` whatever their caller asks
// (Gloo waits for its peers' addresses with its collective timeout). A group uses its store as it
// forms only (NCCL's first collective reads it with get(), which this leaves alone).
class FormationStore : public c10d::PrefixStore {
 public:
  FormationStore(const std::string& prefix, c10::intrusive_ptr<c10d::Store> store,
                 milliseconds bound)
      : PrefixStore(prefix, std::move(store)), bound_(bound) {}
  void wait(const std::vector<std::string>& keys) override { wait(keys, bound_); }
  void wait(const std::vector<std::string>& keys, const milliseconds& timeout) override {
    PrefixStore::wait(keys, std::min(timeout, bound_));
  }

 private:
  milliseconds bound_;
};

}  // namespace

c10::intrusive_ptr<c10d::Store> Rendezvous::host_store(const std::string& host, int port) {
  c10d::TCPStoreOptions store_options;
  store_options.port = static_cast<uint16_t>(port);
  store_options.isServer = true;
  store_options.waitWorkers = false;  // the rounds count the ranks
  auto store = c10::make_intrusive<c10d::TCPStore>(host, store_options);
  initialise(*store);
  return store;
}

int64_t Rendezvous::generation() const {
  return current_ ? rendezvous_keys::generation(current_->store_id, current_->number) : -1;
}

Rendezvous::Rendezvous(Options options, Backend backend)
    : options_(std::move(options)), backend_(backend) {}

Rendezvous::~Rendezvous() {
  // A group that broke may still have a Gloo thread on a dead peer's connection until its
  // timeout, which destroying it would wait for: the process ends without doing so.
  for (auto& group : broken_groups_) group.release();
}

c10::intrusive_ptr<c10d::Store> Rendezvous::connect(milliseconds timeout) {
  // An elastic job's store is a process of its own: no rank hosts it.
  if (options_.rank != 0 || elastic()) {  // a new connection each try: it may be a new process now
    return rendezvous_keys::connect_client(options_.master_addr, options_.master_port, timeout);
  }
  if (!server_) server_ = host_store(options_.master_addr, options_.master_port);
  server_->setTimeout(timeout);
  return server_;
}

c10::intrusive_ptr<c10d::ProcessGroup> Rendezvous::try_round(
    Clock::time_point deadline, const std::function<void()>& between_tries) {
  const auto store = connect(std::min(kTryTimeout, left_until(deadline)));
  const Round seen{text(store->get(rendezvous_keys::kStoreId)),
                   std::stoll(text(store->get(rendezvous_keys::kRound)))};
  int64_t round = seen.number;
  if (broken_ && broken_->store_id == seen.store_id && broken_->number == round) {
    round = move_on_from(*store, round);
  }
  const auto joined = store->add(rendezvous_keys::joined(round), 1);
  const auto ranks = close_round(*store, round, joined, deadline, between_tries);
  if (!ranks) return {};  // moved on: join that one
  if (*ranks == 0) {      // abandoned by a rank that left it (leave_round): on to the next
    move_on_from(*store, round);
    return {};
  }
  if (joined > *ranks) {
    if (elastic()) {
      wait_for_the_next_round(*store, round, deadline, between_tries);
    } else {
      // Full already: its group formed and broke, and the ranks in it have not all found out yet.
      move_on_from(*store, round);
    }
    return {};
  }
  broken_.reset();
  const Round joined_round{seen.store_id, round};
  auto place = options_;  // a fixed job's ranks keep theirs; an elastic job's join in order
  if (elastic()) {
    place.rank = static_cast<int>(joined - 1);
    place.world_size = static_cast<int>(*ranks);
  }
  const auto collective_timeout =
      milliseconds(static_cast<int64_t>(options_.timeout_seconds * 1000));
  const auto formation_bound = std::min<milliseconds>(kFormationBound, collective_timeout);
  try {
    store->setTimeout(formation_bound);
    auto group = make_process_group(c10::make_intrusive<FormationStore>(
                                        "rdzv/" + std::to_string(round), store, formation_bound),
                                    place, backend_);
    store->setTimeout(collective_timeout);
    spdlog::info("rank {} of {}: {} process group of round {} via the c10d store at {}:{}",
                 place.rank, place.world_size, contract::name_of(kBackendNames, backend_), round,
                 options_.master_addr, options_.master_port);
    current_ = joined_round;
    current_group_ = group;
    if (elastic()) beat_ = std::make_unique<GroupBeat>(place, seen.store_id, round);
    return group;
  } catch (const std::exception& e) {
    broken_ = joined_round;  // a rank went while the group formed: on to the next round
    spdlog::warn(
        "rank {} of {}: the group of round {} did not form (a rank that joined it may be gone; "
        "each waits {} s for the others): {}; on to the next round",
        place.rank, place.world_size, round, formation_bound.count() / 1000, train::error_text(e));
    throw;
  }
}

std::optional<int64_t> Rendezvous::close_round(c10d::Store& store, int64_t round, int64_t joined,
                                               Clock::time_point deadline,
                                               const std::function<void()>& between_tries) const {
  const int64_t most = options_.world_size;
  const int64_t least = elastic() ? options_.min_world_size : most;
  const auto settle = milliseconds(static_cast<int64_t>(options_.settle_seconds * 1000));
  int64_t count = joined;
  auto last_join = Clock::now();
  while (true) {
    if (store.check({rendezvous_keys::closed(round)}))
      return number_at(store, rendezvous_keys::closed(round));
    if (count >= most || (count >= least && Clock::now() - last_join >= settle)) {
      // The first to decide closes it; every rank reads the same number back.
      return std::stoll(text(store.compareSet(rendezvous_keys::closed(round), {},
                                              bytes(std::to_string(std::min(count, most))))));
    }
    if (number_at(store, rendezvous_keys::kRound) != round) return std::nullopt;
    if (asked_to_leave()) return leave_round(store, round, joined);
    if (Clock::now() > deadline) {
      throw std::runtime_error(std::to_string(count) + " of " + std::to_string(least) +
                               " ranks joined round " + std::to_string(round));
    }
    between_tries();
    std::this_thread::sleep_for(kPoll);
    if (const auto now = store.add(rendezvous_keys::joined(round), 0); now != count) {
      count = now;
      last_join = Clock::now();
    }
  }
}

int64_t Rendezvous::leave_round(c10d::Store& store, int64_t round, int64_t joined) const {
  // One compare-and-set decides between this rank and a rank closing the round with it.
  const auto closed =
      std::stoll(text(store.compareSet(rendezvous_keys::closed(round), {}, bytes("0"))));
  if (closed >= joined) {
    spdlog::info(
        "slot {}: asked to leave as round {} closed with it: it forms the group, and "
        "leaves at its first step boundary",
        options_.rank, round);
    return closed;
  }
  if (closed == 0) move_on_from(store, round);
  throw LeftTheRendezvous("slot " + std::to_string(options_.rank) + " left round " +
                          std::to_string(round) + " before it closed");
}

void Rendezvous::wait_for_the_next_round(c10d::Store& store, int64_t round,
                                         Clock::time_point deadline,
                                         const std::function<void()>& between_tries) const {
  store.add(rendezvous_keys::waiting(round), 1);
  spdlog::info(
      "slot {}: round {} closed before this rank came; waiting for its group to take it in",
      options_.rank, round);
  // A group that trains beats every step; one that stopped beating for the collective timeout is
  // gone (all its ranks lost), and nobody else would move the store on.
  const auto gone_after = milliseconds(static_cast<int64_t>(options_.timeout_seconds * 1000));
  int64_t beats = store.add(rendezvous_keys::alive(round), 0);
  auto last_beat = Clock::now();
  while (number_at(store, rendezvous_keys::kRound) == round) {
    if (const auto now = store.add(rendezvous_keys::alive(round), 0); now != beats) {
      beats = now;
      last_beat = Clock::now();
    } else if (Clock::now() - last_beat > gone_after) {
      spdlog::warn("slot {}: the group of round {} has not trained for {} s: starting the next",
                   options_.rank, round, options_.timeout_seconds);
      move_on_from(store, round);
      return;
    }
    if (asked_to_leave()) {
      store.add(rendezvous_keys::waiting(round), -1);
      throw LeftTheRendezvous("slot " + std::to_string(options_.rank) +
                              " left while it waited for the group of round " +
                              std::to_string(round) + " to take it in");
    }
    if (Clock::now() > deadline) {
      throw std::runtime_error("round " + std::to_string(round) +
                               " closed before this rank came, and its group never took it in");
    }
    between_tries();
    std::this_thread::sleep_for(kPoll);
  }
}

bool Rendezvous::must_reform() const { return beat_ && beat_->must_reform(); }

std::optional<std::string> Rendezvous::silent_peer() const {
  return beat_ ? beat_->silent_peer() : std::nullopt;
}

c10::intrusive_ptr<c10d::ProcessGroup> Rendezvous::form(const std::function<void()>& between_tries,
                                                        std::function<bool()> leaving) {
  leaving_ = std::move(leaving);
  const auto timeout = options_.rendezvous_timeout_seconds;
  const auto deadline = Clock::now() + milliseconds(static_cast<int64_t>(timeout * 1000));
  std::string last_error = "not every rank joined";
  // What between_tries throws (a rank replaced meanwhile) ends the wait; a failed try does not.
  std::exception_ptr stop;
  const auto check = [&] {
    try {
      between_tries();
    } catch (...) {
      stop = std::current_exception();
      throw;
    }
  };
  while (true) {
    check();
    if (asked_to_leave()) {
      throw LeftTheRendezvous("slot " + std::to_string(options_.rank) + " left before it joined");
    }
    try {
      if (auto group = try_round(deadline, check)) return group;
    } catch (const LeftTheRendezvous&) {
      throw;
    } catch (const std::exception& e) {
      if (stop) std::rethrow_exception(stop);
      last_error = e.what();
      spdlog::debug("rank {}: rendezvous try failed: {}", options_.rank, last_error);
    }
    if (Clock::now() > deadline) {
      throw std::runtime_error("rank " + std::to_string(options_.rank) + " of " +
                               std::to_string(options_.world_size) + ": no group formed at the " +
                               "c10d store " + options_.master_addr + ":" +
                               std::to_string(options_.master_port) + " within " +
                               std::to_string(static_cast<int64_t>(timeout)) +
                               " s (--rendezvous-timeout): " + last_error);
    }
    std::this_thread::sleep_for(kPoll);
  }
}

void Rendezvous::broken() {
  if (current_) broken_ = current_;
  if (current_group_) broken_groups_.push_back(std::move(current_group_));
  current_.reset();
  beat_.reset();
}

}  // namespace cifar::allreduce
