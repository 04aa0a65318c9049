// The run's fence (train/fence.h) within one process: the claim, the checks before each write, and
// which checkpoints the evaluator passes over. Two real processes racing for a run are in
// training_test.cpp.
#include "train/fence.h"

#include <gtest/gtest.h>

#include <fstream>

#include "tests/support/process.h"
#include "train/monitor.h"
#include "train/run_store.h"

namespace cifar::train {
namespace {

TrainConfig run_in(const std::filesystem::path& dir, int64_t incarnation) {
  TrainConfig config;
  config.model_dir = dir.string();
  config.name = "r";
  config.incarnation = incarnation;
  return config;
}

// What a newer pod's claim leaves in the run's directory.
void taken_over_by(const std::filesystem::path& dir, FenceSlot slot, int64_t incarnation) {
  const auto name = slot == FenceSlot::kChief ? "r.chief.fence" : "r.evaluator.fence";
  std::ofstream(dir / name) << R"({"incarnation": )" << incarnation << "}\n";
}

class RunFence : public ::testing::Test {
 protected:
  testing::TempDir dir_;
};

// One message, whether the pod is told the newer incarnation's number (its fence, a trainer's
// call) or only that there is one (its parameter server's refusal).
TEST(ReplacedMessage, SaysTheNewerIncarnationWhereKnownAndWhyThePodStops) {
  EXPECT_STREQ(Replaced(4, "its fence says so").what(),
               "this pod was replaced by incarnation 4; stopping (its fence says so)");
  EXPECT_STREQ(Replaced(std::nullopt, "PS shard 0 refused its push").what(),
               "this pod was replaced by a newer incarnation; stopping (PS shard 0 refused its "
               "push)");
}

TEST_F(RunFence, WithoutAnIncarnationThereIsNoneAndEveryWriteGoesThrough) {
  const auto fence = Fence::claim(run_in(dir_.path(), 0), FenceSlot::kChief);
  EXPECT_EQ(fence.incarnation(), 0);
  EXPECT_FALSE(read_fence(run_in(dir_.path(), 0), FenceSlot::kChief));
  taken_over_by(dir_.path(), FenceSlot::kChief, 9);
  EXPECT_NO_THROW(fence.check());
  EXPECT_NO_THROW(Fence().check());
}

TEST_F(RunFence, AWriterStopsOnceANewerIncarnationOfItsSlotHasClaimedTheRun) {
  const auto config = run_in(dir_.path(), 3);
  const auto fence = Fence::claim(config, FenceSlot::kChief);
  EXPECT_EQ(fence.incarnation(), 3);
  fence.record_resumed_step(40);
  ASSERT_TRUE(read_fence(config, FenceSlot::kChief));
  EXPECT_EQ(read_fence(config, FenceSlot::kChief)->incarnation, 3);
  EXPECT_EQ(read_fence(config, FenceSlot::kChief)->resumed_step, 40);
  EXPECT_NO_THROW(fence.check());
  MonitorLog monitor(open_run_store(config), fence);
  monitor.append({});
  EXPECT_NO_THROW(monitor.wait_until_saved());

  taken_over_by(dir_.path(), FenceSlot::kEvaluator, 7);  // another slot's: not this writer's
  EXPECT_NO_THROW(fence.check());
  taken_over_by(dir_.path(), FenceSlot::kChief, 4);
  try {
    fence.check();
    ADD_FAILURE() << "no Replaced";
  } catch (const Replaced& e) {
    EXPECT_NE(std::string(e.what()).find("this pod was replaced by incarnation 4; stopping"),
              std::string::npos)
        << e.what();
  }
  // The monitor log is written in the background: its write stops there, and the next call says so.
  monitor.append({});
  EXPECT_THROW(monitor.wait_until_saved(), Replaced);
  EXPECT_THROW(monitor.append({}), Replaced);
  std::ifstream in(dir_.path() / MonitorLog::kFileName);
  std::string line;
  int lines = 0;
  while (std::getline(in, line)) ++lines;
  EXPECT_EQ(lines, 1);  // the record before the takeover, and nothing since
}

TEST_F(RunFence, AnOlderIncarnationCannotClaimAndTheSameOneClaimsAgain) {
  taken_over_by(dir_.path(), FenceSlot::kEvaluator, 5);
  EXPECT_THROW(static_cast<void>(Fence::claim(run_in(dir_.path(), 4), FenceSlot::kEvaluator)),
               Replaced);
  // The same pod, restarted in place.
  EXPECT_EQ(Fence::claim(run_in(dir_.path(), 5), FenceSlot::kEvaluator).incarnation(), 5);
  static_cast<void>(Fence::claim(run_in(dir_.path(), 6), FenceSlot::kEvaluator));
  EXPECT_EQ(read_fence(run_in(dir_.path(), 6), FenceSlot::kEvaluator)->incarnation, 6);
}

// An elastic job's chief, each round's rank 0, claims with its round's generation: the rank 0 of a
// newer round takes the slot from an older one (which stops at its next write, though its pod is
// no older), and a claim of an older round, late, cannot take it back.
TEST_F(RunFence, AnElasticJobsChiefClaimsWithItsRoundsGenerationAndANewerRoundsTakesOver) {
  const auto pod = run_in(dir_.path(), 1);  // every pod of the job may be incarnation 1
  const auto round_3 = Fence::claim(pod, FenceSlot::kChief, (int64_t{1} << 40) + 3);
  const auto round_4 = Fence::claim(pod, FenceSlot::kChief, (int64_t{1} << 40) + 4);
  EXPECT_EQ(read_fence(pod, FenceSlot::kChief)->incarnation, (int64_t{1} << 40) + 4);
  EXPECT_NO_THROW(round_4.check());
  EXPECT_THROW(round_3.check(), Replaced);
  EXPECT_THROW(static_cast<void>(Fence::claim(pod, FenceSlot::kChief, (int64_t{1} << 40) + 2)),
               Replaced);
  // By hand (no incarnation): no fence, as for a fixed job.
  EXPECT_EQ(Fence::claim(run_in(dir_.path(), 0), FenceSlot::kChief, 99).incarnation(), 0);
}

// Incarnations are numbered per job: a job that continues another's run (checkpoint.resumeFrom)
// starts at 1, below the other's numbers, and still takes the run over; the other job's writer,
// if it still runs, stops at its next write.
TEST_F(RunFence, AJobThatContinuesAnothersRunTakesItOverWhateverItsNumbers) {
  auto first = run_in(dir_.path(), 7);
  first.job_uid = "uid-first";
  Fence::claim(first, FenceSlot::kChief).record_resumed_step(40);

  auto second = run_in(dir_.path(), 1);
  second.job_uid = "uid-second";
  const auto fence = Fence::claim(second, FenceSlot::kChief);  // no Replaced, though 1 < 7
  const auto record = read_fence(second, FenceSlot::kChief);
  ASSERT_TRUE(record);
  EXPECT_EQ(record->incarnation, 1);
  EXPECT_EQ(record->job_uid, "uid-second");
  EXPECT_NO_THROW(fence.check());

  // The first job's chief, had it held the slot on, is stopped by the second job's record.
  std::ofstream(dir_.path() / "r.chief.fence") << R"({"incarnation": 7, "job": "uid-first"})";
  const auto first_fence = Fence::claim(first, FenceSlot::kChief);
  std::ofstream(dir_.path() / "r.chief.fence") << R"({"incarnation": 1, "job": "uid-second"})";
  try {
    first_fence.check();
    ADD_FAILURE() << "no Replaced";
  } catch (const Replaced& e) {
    EXPECT_NE(std::string(e.what()).find("job uid-second continues this run now"),
              std::string::npos)
        << e.what();
  }
}

TEST(StaleCheckpoint, OnlyAnOlderChiefsCheckpointPastTheStepItsReplacementResumedAt) {
  const FenceRecord holder{5, 100, ""};
  EXPECT_TRUE(is_stale_checkpoint(holder, 4, 101));
  EXPECT_FALSE(is_stale_checkpoint(holder, 4, 100));  // what the replacement resumed from
  EXPECT_FALSE(is_stale_checkpoint(holder, 5, 140));  // the replacement's own
  EXPECT_FALSE(is_stale_checkpoint(FenceRecord{5, std::nullopt, ""}, 4, 101));  // not resumed yet
  EXPECT_FALSE(is_stale_checkpoint(std::nullopt, 0, 101));                      // no fence
}

}  // namespace
}  // namespace cifar::train
