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

namespace cifar::allreduce {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr auto kPoll = milliseconds(100);
// The longest a single try waits on the store (its connection, a key): a try that fails is
// retried until the rendezvous timeout, against a store that may since have been replaced.
constexpr auto kTryTimeout = milliseconds(30'000);

const std::string kStoreIdKey = "rdzv/store";
const std::string kRoundKey = "rdzv/round";

std::string joined_key(int64_t round) { return "rdzv/" + std::to_string(round) + "/joined"; }

std::vector<uint8_t> bytes(const std::string& text) { return {text.begin(), text.end()}; }
std::string text(const std::vector<uint8_t>& bytes) { return {bytes.begin(), bytes.end()}; }

milliseconds left_until(Clock::time_point deadline) {
  return std::max(milliseconds(1000),
                  std::chrono::duration_cast<milliseconds>(deadline - Clock::now()));
}

// The round after `round`, unless another rank moved on already; returns the store's round.
int64_t move_on_from(c10d::Store& store, int64_t round) {
  return std::stoll(text(
      store.compareSet(kRoundKey, bytes(std::to_string(round)), bytes(std::to_string(round + 1)))));
}

}  // namespace

Rendezvous::Rendezvous(Options options, Backend backend)
    : options_(std::move(options)), backend_(backend) {}

Rendezvous::~Rendezvous() {
  // A group that broke may still have a Gloo thread on a dead peer's connection until its
  // timeout, which destroying it would wait for: the process ends without doing so.
  for (auto& group : broken_groups_) group.release();
}

c10::intrusive_ptr<c10d::Store> Rendezvous::connect(milliseconds timeout) {
  c10d::TCPStoreOptions store_options;
  store_options.port = static_cast<uint16_t>(options_.master_port);
  store_options.isServer = options_.rank == 0;
  store_options.waitWorkers = false;  // the rounds count the ranks
  store_options.timeout = timeout;
  if (options_.rank != 0) {  // a new connection each try: rank 0 may be a new process now
    return c10::make_intrusive<c10d::TCPStore>(options_.master_addr, store_options);
  }
  if (!server_) {
    server_ = c10::make_intrusive<c10d::TCPStore>(options_.master_addr, store_options);
    // Which store this is: ranks that knew rank 0's last one start its rounds from the first.
    server_->set(kStoreIdKey, bytes(std::to_string(::getpid()) + "@" +
                                    std::to_string(Clock::now().time_since_epoch().count())));
    server_->compareSet(kRoundKey, {}, bytes("0"));
  }
  server_->setTimeout(timeout);
  return server_;
}

c10::intrusive_ptr<c10d::ProcessGroup> Rendezvous::try_round(
    Clock::time_point deadline, const std::function<void()>& between_tries) {
  const auto store = connect(std::min(kTryTimeout, left_until(deadline)));
  const Round seen{text(store->get(kStoreIdKey)), std::stoll(text(store->get(kRoundKey)))};
  int64_t round = seen.number;
  if (broken_ && broken_->store_id == seen.store_id && broken_->number == round) {
    round = move_on_from(*store, round);
  }
  const auto joined = store->add(joined_key(round), 1);
  if (joined > options_.world_size) {
    // Full already: its group formed and broke, and the ranks in it have not all found out yet.
    move_on_from(*store, round);
    return {};
  }
  broken_.reset();
  for (int64_t count = joined; count < options_.world_size;
       count = store->add(joined_key(round), 0)) {
    if (std::stoll(text(store->get(kRoundKey))) != round) return {};  // moved on: join that one
    if (Clock::now() > deadline) {
      throw std::runtime_error(std::to_string(count) + " of " +
                               std::to_string(options_.world_size) + " ranks joined round " +
                               std::to_string(round));
    }
    between_tries();
    std::this_thread::sleep_for(kPoll);
  }
  const Round joined_round{seen.store_id, round};
  try {
    store->setTimeout(milliseconds(static_cast<int64_t>(options_.timeout_seconds * 1000)));
    auto group = make_process_group(
        c10::make_intrusive<c10d::PrefixStore>("rdzv/" + std::to_string(round), store), options_,
        backend_);
    spdlog::info("rank {} of {}: {} process group of round {} via the c10d store at {}:{}",
                 options_.rank, options_.world_size, contract::name_of(kBackendNames, backend_),
                 round, options_.master_addr, options_.master_port);
    current_ = joined_round;
    current_group_ = group;
    return group;
  } catch (...) {
    broken_ = joined_round;  // a rank went while the group formed: on to the next round
    throw;
  }
}

c10::intrusive_ptr<c10d::ProcessGroup> Rendezvous::form(
    const std::function<void()>& between_tries) {
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
    try {
      if (auto group = try_round(deadline, check)) return group;
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
}

}  // namespace cifar::allreduce
