// The rendezvous rounds (rendezvous.h) with real TCPStores and Gloo groups whose ranks are
// threads of this process: a rank left after a loss and the lost rank's replacement form the next
// round's group, whichever of them comes first, and a rank that waits in vain says how many came.
#include "distributed/allreduce/rendezvous.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <atomic>
#include <future>
#include <stdexcept>
#include <string>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include "distributed/allreduce/rendezvous_keys.h"
#include "tests/support/process.h"

namespace cifar::allreduce {
namespace {

using Group = c10::intrusive_ptr<c10d::ProcessGroup>;

Options rank_of_two(int rank, int port, double rendezvous_timeout = 60) {
  Options options;
  options.rank = rank;
  options.world_size = 2;
  options.master_port = port;
  options.timeout_seconds = 30;
  options.rendezvous_timeout_seconds = rendezvous_timeout;
  return options;
}

// The group's ranks summed with an all-reduce: every rank of a working group gets 0 + 1.
int64_t sum_of_ranks(const Group& group) {
  std::vector<torch::Tensor> value{torch::tensor({int64_t{group->getRank()}})};
  group->allreduce(value)->wait();
  return value[0].item<int64_t>();
}

// Forms a group on another thread (the ranks of one group must form it side by side).
std::future<Group> form_async(Rendezvous& rendezvous) {
  return std::async(std::launch::async, [&] { return rendezvous.form([] {}); });
}

// Both ranks' groups are one working group of round `round`.
void expect_one_group(const Rendezvous& rank0, const Group& a, const Rendezvous& rank1,
                      const Group& b, int64_t round) {
  EXPECT_EQ(rank0.round(), round);
  EXPECT_EQ(rank1.round(), round);
  auto sum = std::async(std::launch::async, [&] { return sum_of_ranks(a); });
  EXPECT_EQ(sum_of_ranks(b), 1);
  EXPECT_EQ(sum.get(), 1);
}

// Rank 0 forms the first round's group with a rank 1 that is then lost (its process gone).
void form_and_lose_rank1(Rendezvous& rank0, int port) {
  Rendezvous lost(rank_of_two(1, port), Backend::kGloo);
  auto group0 = form_async(rank0);
  lost.form([] {});
  group0.get();
}

// The generation an elastic job's chief claims the run's fence with: a store's rounds in order,
// every round of a store started later above them, whatever its round.
TEST(RendezvousGeneration, OrdersTheRoundsOfAStoreAndEveryStoreStartedLaterAboveThem) {
  const auto store = rendezvous_keys::new_store_id(1'795'000'000'000, 41);
  const auto later_store = rendezvous_keys::new_store_id(1'795'000'000'001, 7);
  EXPECT_LT(rendezvous_keys::generation(store, 0), rendezvous_keys::generation(store, 1));
  EXPECT_LT(rendezvous_keys::generation(store, 1000), rendezvous_keys::generation(later_store, 0));
  EXPECT_GT(rendezvous_keys::generation(store, 0), int64_t{1} << 50);  // above any pod's number
  EXPECT_EQ(rendezvous_keys::generation("no start time", 5), 5);
}

TEST(Rendezvous, TwoRanksFormTheFirstRoundsGroup) {
  const int port = cifar::testing::free_port();
  Rendezvous rank0(rank_of_two(0, port), Backend::kGloo);
  Rendezvous rank1(rank_of_two(1, port), Backend::kGloo);
  auto group0 = form_async(rank0);
  auto group1 = form_async(rank1);
  const auto a = group0.get();
  expect_one_group(rank0, a, rank1, group1.get(), 0);
}

// Rank 1 lost; rank 0 finds its group broken first, then rank 1's replacement comes.
TEST(Rendezvous, TheRankLeftWaitsInTheNextRoundForTheReplacement) {
  const int port = cifar::testing::free_port();
  Rendezvous rank0(rank_of_two(0, port), Backend::kGloo);
  form_and_lose_rank1(rank0, port);
  const auto first_generation = rank0.generation();
  rank0.broken();
  auto again = form_async(rank0);
  Rendezvous replacement(rank_of_two(1, port), Backend::kGloo);
  const auto b = replacement.form([] {});
  expect_one_group(rank0, again.get(), replacement, b, 1);
  EXPECT_EQ(rank0.generation(), first_generation + 1);
  EXPECT_EQ(replacement.generation(), rank0.generation());
}

// The replacement comes before rank 0 has found its group broken: it joins the old round, finds
// it full, and moves everyone on to the next, where rank 0 meets it.
TEST(Rendezvous, AReplacementThatComesFirstMovesEveryoneOnToTheNextRound) {
  const int port = cifar::testing::free_port();
  Rendezvous rank0(rank_of_two(0, port), Backend::kGloo);
  form_and_lose_rank1(rank0, port);
  Rendezvous replacement(rank_of_two(1, port), Backend::kGloo);
  auto replaced = form_async(replacement);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // it waits in round 1
  rank0.broken();
  const auto a = rank0.form([] {});
  expect_one_group(rank0, a, replacement, replaced.get(), 1);
}

TEST(Rendezvous, ARankThatWaitsInVainSaysHowManyCame) {
  Rendezvous alone(rank_of_two(0, cifar::testing::free_port(), /*rendezvous_timeout=*/1),
                   Backend::kGloo);
  try {
    alone.form([] {});
    FAIL() << "formed a group of two alone";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("no group formed"), std::string::npos) << what;
    EXPECT_NE(what.find("within 1 s (--rendezvous-timeout): 1 of 2 ranks joined round 0"),
              std::string::npos)
        << what;
  }
}

// Slot `slot` of an elastic job of at most 3 ranks, at least 1, meeting at a store of its own.
Options elastic_slot(int slot, int port) {
  Options options;
  options.rank = slot;
  options.world_size = 3;
  options.min_world_size = 1;
  options.settle_seconds = 2;
  options.master_port = port;
  options.timeout_seconds = 60;
  options.rendezvous_timeout_seconds = 60;
  return options;
}

// A scale-down's SIGTERM comes to a rank as it joins the next round. It takes itself out of the
// round before the round closes, and the rank left forms a group of 1 at once in the next round,
// rather than one of 2 that would wait the 60 s collective timeout for a rank that is gone.
TEST(Rendezvous, AnElasticRankAskedToLeaveWhileItsRoundIsOpenLeavesItAndTheOthersFormWithoutIt) {
  const int port = cifar::testing::free_port();
  const auto store = Rendezvous::host_store("127.0.0.1", port);
  Rendezvous staying(elastic_slot(0, port), Backend::kGloo);
  Rendezvous leaving(elastic_slot(1, port), Backend::kGloo);
  const auto started = std::chrono::steady_clock::now();
  auto group = form_async(staying);
  std::atomic<int> waits{0};
  // Asked once it has waited in the round a while (well within the 2 s settle time).
  EXPECT_THROW(leaving.form([] {}, [&] { return ++waits > 5; }), LeftTheRendezvous);
  const auto formed = group.get();
  EXPECT_EQ(formed->getSize(), 1);
  EXPECT_EQ(staying.round(), 1);  // round 0 was abandoned
  EXPECT_EQ(rendezvous_keys::number_at(*store, rendezvous_keys::closed(0)), 0);
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(30));
  EXPECT_EQ(leaving.round(), -1);
}

// A rank asked to leave once its round closed with it is one of the group: it forms the group
// (and leaves at the group's first step boundary, as a rank asked while training does).
TEST(Rendezvous, AnElasticRankAskedToLeaveAfterItsRoundClosedWithItFormsTheGroup) {
  const int port = cifar::testing::free_port();
  const auto store = Rendezvous::host_store("127.0.0.1", port);
  Rendezvous first(elastic_slot(0, port), Backend::kGloo);
  Rendezvous second(elastic_slot(1, port), Backend::kGloo);
  auto group = form_async(first);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // first joins round 0 first
  const auto b = second.form([] {},
                             [&] {
                               // Asked to leave only once the round closed (the settle time after
                               // the second join).
                               return store->check({rendezvous_keys::closed(0)});
                             });
  expect_one_group(first, group.get(), second, b, 0);
  EXPECT_EQ(rendezvous_keys::number_at(*store, rendezvous_keys::closed(0)), 2);
}

// A rank that came after its round closed, asked to leave while it waits to be taken in, takes
// back its place in the queue.
TEST(Rendezvous, AnElasticRankThatWaitsToBeTakenInAndIsAskedToLeaveLeavesTheQueue) {
  const int port = cifar::testing::free_port();
  const auto store = Rendezvous::host_store("127.0.0.1", port);
  Rendezvous first(elastic_slot(0, port), Backend::kGloo);
  const auto formed = first.form([] {});  // a group of 1, closed after the settle time
  Rendezvous late(elastic_slot(1, port), Backend::kGloo);
  std::atomic<bool> asked{false};
  auto left =
      std::async(std::launch::async, [&] { late.form([] {}, [&] { return asked.load(); }); });
  ASSERT_TRUE(cifar::testing::wait_for(
      [&] { return store->add(rendezvous_keys::waiting(0), 0) == 1; }, std::chrono::seconds(10)));
  asked = true;
  EXPECT_THROW(left.get(), LeftTheRendezvous);
  EXPECT_EQ(store->add(rendezvous_keys::waiting(0), 0), 0);
  EXPECT_EQ(formed->getSize(), 1);
}

// A rank lost as its round closed (SIGKILLed after it joined, before its group formed: here a
// join that nobody follows) costs the rank left the formation bound, not the 120 s collective
// timeout: it gives that group up, and forms the next round's with the rank that comes next.
TEST(Rendezvous, AnElasticRankLostAsItsRoundClosedCostsTheOthersOnlyTheFormationBound) {
  const int port = cifar::testing::free_port();
  const auto store = Rendezvous::host_store("127.0.0.1", port);
  const auto slot = [&](int number) {
    auto options = elastic_slot(number, port);
    options.min_world_size = 2;
    options.timeout_seconds = 120;
    return options;
  };
  Rendezvous staying(slot(0), Backend::kGloo);
  const auto started = std::chrono::steady_clock::now();
  auto group = form_async(staying);
  ASSERT_TRUE(cifar::testing::wait_for(
      [&] { return store->add(rendezvous_keys::joined(0), 0) == 1; }, std::chrono::seconds(10)));
  store->add(rendezvous_keys::joined(0), 1);  // the rank then lost
  ASSERT_TRUE(cifar::testing::wait_for([&] { return store->check({rendezvous_keys::closed(0)}); },
                                       std::chrono::seconds(10)));
  Rendezvous next(slot(2), Backend::kGloo);
  const auto b = next.form([] {});
  expect_one_group(staying, group.get(), next, b, 1);
  const auto took = std::chrono::steady_clock::now() - started;
  EXPECT_LT(took, kFormationBound + std::chrono::seconds(15))
      << std::chrono::duration_cast<std::chrono::seconds>(took).count() << " s";
}

// What the fence throws while a rank waits (an older incarnation replaced meanwhile) ends the wait.
TEST(Rendezvous, WhatTheCheckBetweenTriesThrowsEndsTheWait) {
  Rendezvous alone(rank_of_two(0, cifar::testing::free_port()), Backend::kGloo);
  int checks = 0;
  EXPECT_THROW(alone.form([&] {
    if (++checks == 5) throw std::logic_error("replaced");
  }),
               std::logic_error);
  EXPECT_EQ(checks, 5);
}

}  // namespace
}  // namespace cifar::allreduce
