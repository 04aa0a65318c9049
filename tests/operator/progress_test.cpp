// status.progress from the runtime's Prometheus exposition (the scraping itself runs against a
// real cifar-train in tests/integration/operator_test.cpp).
#include "cifartrainjob/progress.h"

#include <gtest/gtest.h>

namespace progress_test {
namespace {

using cifar::op::job_progress;
using cifar::op::JobPods;
using cifar::op::parse_metric_samples;
using cifar::op::PodMetrics;

// As the runtime serves it (prometheus-cpp's text format).
const char* const kMaster = R"(# HELP cifar_steps_total Optimizer steps
# TYPE cifar_steps_total counter
cifar_steps_total{index="0",job="j",role="master"} 220
cifar_loss{index="0",job="j",role="master"} 1.25
cifar_train_accuracy{index="0",job="j",role="master"} 0.5
cifar_test_accuracy{index="0",job="j",role="master"} 0
cifar_epoch{index="0",job="j",role="master"} 3
cifar_images_per_second{index="0",job="j",role="master"} 100.5
cifar_step_seconds_bucket{index="0",job="j",role="master",le="0.5"} 7
exposer_request_latencies{quantile="0.5"} Nan
)";

PodMetrics pod(const std::string& role, int index, const std::string& text) {
  return {role, index, parse_metric_samples(text)};
}

TEST(Progress, ParsesTheFirstSampleOfEachMetricAndSkipsCommentsAndNaN) {
  const auto samples = parse_metric_samples(kMaster);
  EXPECT_EQ(samples.at("cifar_steps_total"), 220);
  EXPECT_EQ(samples.at("cifar_loss"), 1.25);
  EXPECT_EQ(samples.at("cifar_step_seconds_bucket"), 7);
  EXPECT_EQ(samples.count("exposer_request_latencies"), 0U);
  EXPECT_EQ(parse_metric_samples("no_labels 4\nbroken{\n{x} 1\n").at("no_labels"), 4);
  EXPECT_EQ(parse_metric_samples("no_labels 4\nbroken{\n{x} 1\n").size(), 1U);
}

TEST(Progress, TheChiefGivesEpochStepLossAndTrainersSumTheirImagesPerSecond) {
  const auto progress = job_progress(
      {pod("master", 0, kMaster), pod("worker", 0, "cifar_images_per_second 50\ncifar_epoch 9\n"),
       pod("worker", 1, "cifar_images_per_second 25.04\n")},
      JobPods{true, false}, "2026-11-22T10:00:00Z");
  ASSERT_TRUE(progress);
  EXPECT_EQ((*progress)["epoch"], 3);
  EXPECT_EQ((*progress)["step"], 220);
  EXPECT_EQ((*progress)["loss"], 1.25);
  EXPECT_EQ((*progress)["trainAccuracy"], 0.5);
  EXPECT_EQ((*progress)["imagesPerSecond"], 175.5);  // 175.54, to 0.1 for kubectl get ctj
  EXPECT_EQ((*progress)["updatedAt"], "2026-11-22T10:00:00Z");
  EXPECT_FALSE(progress->contains("testAccuracy"));  // 0: not evaluated yet
}

TEST(Progress, TestAccuracyComesFromTheEvaluatorWhenThereIsOne) {
  const auto progress =
      job_progress({pod("master", 0, kMaster), pod("evaluator", 0, "cifar_test_accuracy 0.75\n")},
                   JobPods{true, true}, "2026-11-22T10:00:00Z");
  ASSERT_TRUE(progress);
  EXPECT_EQ((*progress)["testAccuracy"], 0.75);
}

TEST(Progress, TheChiefsCheckpointsSayTheStepSavedAndSinceWhenTheStoreIsAway) {
  auto progress = job_progress({pod("master", 0,
                                    "cifar_checkpoint_saved_step 120\n"
                                    "cifar_store_unreachable_since_seconds 1795860000.7\n")},
                               JobPods{true, false}, "t");
  ASSERT_TRUE(progress);
  EXPECT_EQ(
      (*progress)["checkpoint"],
      (nlohmann::json{{"savedStep", 120}, {"storeUnreachableSince", "2026-11-28T10:00:00Z"}}));
  // 0: the store answers.
  progress = job_progress({pod("master", 0,
                               "cifar_checkpoint_saved_step 130\n"
                               "cifar_store_unreachable_since_seconds 0\n")},
                          JobPods{true, false}, "t");
  ASSERT_TRUE(progress);
  EXPECT_EQ((*progress)["checkpoint"], (nlohmann::json{{"savedStep", 130}}));
  // Nothing saved yet (-1), the store answering: nothing to say.
  progress = job_progress({pod("master", 0,
                               "cifar_checkpoint_saved_step -1\n"
                               "cifar_store_unreachable_since_seconds 0\n")},
                          JobPods{true, false}, "t");
  EXPECT_FALSE(progress->contains("checkpoint")) << progress->dump();
  // A runtime that says nothing of it.
  EXPECT_FALSE(
      job_progress({pod("master", 0, kMaster)}, JobPods{true, false}, "t")->contains("checkpoint"));
}

TEST(Progress, WorkerZeroIsTheChiefWithoutAMasterAndNoChiefMeansNoProgress) {
  auto progress =
      job_progress({pod("worker", 0, "cifar_epoch 2\ncifar_test_accuracy 0.6\n")}, {}, "t");
  ASSERT_TRUE(progress);
  EXPECT_EQ((*progress)["epoch"], 2);
  EXPECT_EQ((*progress)["testAccuracy"], 0.6);
  EXPECT_FALSE(job_progress({pod("worker", 1, "cifar_epoch 2\n")}, {}, "t"));
  EXPECT_FALSE(job_progress({pod("evaluator", 0, "cifar_test_accuracy 0.6\n")}, {}, "t"));
}

TEST(Progress, NoStandInsForPodsWhoseScrapeFailed) {
  // The job has a master, not scraped this round: worker 0 does not stand in for it.
  EXPECT_FALSE(job_progress({pod("worker", 0, "cifar_epoch 2\n")}, JobPods{true, false}, "t"));
  // The job has an evaluator, not scraped: no test accuracy from the chief instead.
  const auto progress =
      job_progress({pod("master", 0, "cifar_test_accuracy 0.6\n")}, JobPods{true, true}, "t");
  ASSERT_TRUE(progress);
  EXPECT_FALSE(progress->contains("testAccuracy"));
}

// An all-reduce job's world: the workers that report the newest round. Worker 1 still reports
// the round its group left (it has not found out yet); worker 3 waits between rounds (no group).
TEST(Progress, TheWorldIsTheWorkersOfTheNewestRoundAndStandsBetweenRounds) {
  const auto in_round = [](int size, int round) {
    return "cifar_job_step 80\ncifar_allreduce_world_size " + std::to_string(size) +
           "\ncifar_allreduce_round " + std::to_string(round) + "\n";
  };
  const auto progress = job_progress(
      {pod("worker", 0, in_round(3, 4)), pod("worker", 1, in_round(2, 3)),
       pod("worker", 2, in_round(3, 4)), pod("worker", 3, "cifar_allreduce_world_size 0\n"),
       pod("worker", 4, in_round(3, 4))},
      {}, "t");
  ASSERT_TRUE(progress);
  EXPECT_EQ((*progress)["world"],
            (nlohmann::json{{"round", 4}, {"size", 3}, {"workers", {0, 2, 4}}}));
  // A rank of the newest round not scraped: no world from a partial view.
  EXPECT_FALSE(
      job_progress({pod("worker", 0, in_round(3, 4)), pod("worker", 2, in_round(3, 4))}, {}, "t")
          ->contains("world"));
  // Between rounds none reports one: the previous world stands.
  const auto between = job_progress({pod("worker", 0, "cifar_job_step 81\n")}, {}, "t", *progress);
  ASSERT_TRUE(between);
  EXPECT_EQ((*between)["world"], (*progress)["world"]);
  // Without worker 0 (lost), the first worker of the world is the chief.
  const auto without_zero = job_progress(
      {pod("worker", 2, in_round(2, 5)), pod("worker", 1, in_round(2, 5) + "cifar_epoch 7\n")}, {},
      "t");
  ASSERT_TRUE(without_zero);
  EXPECT_EQ((*without_zero)["epoch"], 7);
  EXPECT_EQ((*without_zero)["world"]["workers"], (nlohmann::json{1, 2}));
  EXPECT_FALSE(job_progress({pod("worker", 1, "cifar_epoch 2\n")}, {}, "t"));  // no world
}

// KEP-2779's progressPercentage and estimatedRemainingSeconds, from the job's step and total.
const char* const kJobAt250 =
    "cifar_steps_total 40\ncifar_job_step 250\ncifar_job_total_steps 1000\n";

TEST(Progress, TheJobsStepAndTotalGiveThePercentageAndTheRateSinceTheLastWriteTheEstimate) {
  const nlohmann::json previous = {{"step", 150}, {"updatedAt", "2026-11-22T10:00:00Z"}};
  const auto progress = job_progress({pod("master", 0, kJobAt250)}, JobPods{true, false},
                                     "2026-11-22T10:00:10Z", previous);
  ASSERT_TRUE(progress);
  EXPECT_EQ((*progress)["step"], 250);  // the job's, not this process's 40
  EXPECT_EQ((*progress)["progressPercentage"], 25);
  EXPECT_EQ((*progress)["estimatedRemainingSeconds"], 75);  // 750 steps at 10 a second
}

// A new estimate is blended with the previous one counted down, so one slow or fast interval
// (an evaluation, a checkpoint) does not swing the ETA.
TEST(Progress, TheEstimateIsSmoothedWithThePreviousOneCountedDown) {
  const nlohmann::json previous = {
      {"step", 150}, {"updatedAt", "2026-11-22T10:00:00Z"}, {"estimatedRemainingSeconds", 100}};
  const auto progress = job_progress({pod("master", 0, kJobAt250)}, JobPods{true, false},
                                     "2026-11-22T10:00:10Z", previous);
  ASSERT_TRUE(progress);
  // 0.3 x 75 (750 steps at 10 a second) + 0.7 x 90 (100 counted down by 10 s) = 85.5
  EXPECT_EQ((*progress)["estimatedRemainingSeconds"], 86);
}

TEST(Progress, NoEstimateUntilThereIsARateAndThePreviousOneStandsWithoutANewStep) {
  const auto first =
      job_progress({pod("master", 0, kJobAt250)}, JobPods{true, false}, "2026-11-22T10:00:10Z");
  ASSERT_TRUE(first);
  EXPECT_EQ((*first)["progressPercentage"], 25);
  EXPECT_FALSE(first->contains("estimatedRemainingSeconds"));
  const nlohmann::json previous = {
      {"step", 250}, {"updatedAt", "2026-11-22T10:00:00Z"}, {"estimatedRemainingSeconds", 80}};
  const auto stalled = job_progress({pod("master", 0, kJobAt250)}, JobPods{true, false},
                                    "2026-11-22T10:00:10Z", previous);
  ASSERT_TRUE(stalled);
  EXPECT_EQ((*stalled)["estimatedRemainingSeconds"], 80);
}

TEST(Progress, ADoneJobIsAtOneHundredPercentWithNothingToGoAndNoTotalMeansNoPercentage) {
  const auto done =
      job_progress({pod("master", 0, "cifar_job_step 1000\ncifar_job_total_steps 1000\n")},
                   JobPods{true, false}, "t");
  ASSERT_TRUE(done);
  EXPECT_EQ((*done)["progressPercentage"], 100);
  EXPECT_EQ((*done)["estimatedRemainingSeconds"], 0);
  // A runtime without the job's position: its own steps, and no percentage to give.
  const auto older = job_progress({pod("master", 0, kMaster)}, JobPods{true, false}, "t");
  ASSERT_TRUE(older);
  EXPECT_EQ((*older)["step"], 220);
  EXPECT_FALSE(older->contains("progressPercentage"));
  EXPECT_FALSE(older->contains("estimatedRemainingSeconds"));
}

// A parameter server's per-trainer series (contract/metrics.h), as PS 0 serves them.
const char* const kPs = R"(cifar_ps_version{index="0",job="j",role="ps"} 120
cifar_ps_trainer_training{index="0",job="j",role="ps",trainer="0"} 1
cifar_ps_trainer_training{index="0",job="j",role="ps",trainer="1"} 0
cifar_ps_trainer_training{index="0",job="j",role="ps",trainer="2"} 0
cifar_ps_trainer_dropped_at_step{index="0",job="j",role="ps",trainer="1"} 117
)";

PodMetrics ps_pod(const std::string& text) {
  auto ps = pod("ps", 0, text);
  ps.by_trainer = cifar::op::parse_samples_by_label(text, "trainer");
  return ps;
}

TEST(Progress, SamplesByALabelsValue) {
  const auto by_trainer = cifar::op::parse_samples_by_label(kPs, "trainer");
  ASSERT_EQ(by_trainer.size(), 3U);
  EXPECT_EQ(by_trainer.at("1").at("cifar_ps_trainer_training"), 0);
  EXPECT_EQ(by_trainer.at("1").at("cifar_ps_trainer_dropped_at_step"), 117);
  EXPECT_EQ(by_trainer.at("0").count("cifar_ps_trainer_dropped_at_step"), 0U);
  // A label whose name only ends like the one asked for is another label.
  EXPECT_TRUE(cifar::op::parse_samples_by_label("m{subtrainer=\"1\"} 1\n", "trainer").empty());
}

TEST(Progress, ALabelValueMayHoldBracesCommasAndEscapedQuotes) {
  // A stall report names C++ functions (lambdas in braces) and what it waits on, quoted.
  const std::string text =
      "cifar_stall_reported{job=\"j\",report=\"stalled: waiting on read \\\"a,b\\\" for 3 s; "
      "main thread in f()::{lambda()#1}::operator()\\nnext\",role=\"worker\"} 1\n"
      "cifar_steps_total{job=\"j\"} 7\n";
  const auto by_report = cifar::op::parse_samples_by_label(text, "report");
  ASSERT_EQ(by_report.size(), 1U);
  EXPECT_EQ(by_report.begin()->first,
            "stalled: waiting on read \"a,b\" for 3 s; main thread in "
            "f()::{lambda()#1}::operator()\nnext");
  EXPECT_EQ(by_report.begin()->second.at("cifar_stall_reported"), 1);
  EXPECT_EQ(cifar::op::parse_samples_by_label(text, "role").at("worker").size(), 1U);
  EXPECT_EQ(cifar::op::parse_metric_samples(text).at("cifar_steps_total"), 7);
}

TEST(Progress, PsZeroSaysWhichTrainersTrainAndWhenOneWasDropped) {
  const auto progress =
      job_progress({pod("master", 0, kJobAt250), ps_pod(kPs)}, JobPods{true, false}, "t");
  ASSERT_TRUE(progress);
  EXPECT_EQ((*progress)["trainers"],
            nlohmann::json::parse(R"({"expected": 3, "training": 1, "missing":
              [{"trainer": 1, "droppedAtStep": 117}, {"trainer": 2}]})"));
  // PS 0 not scraped this round: the trainers as they were; a job without a PS has none.
  const auto next =
      job_progress({pod("master", 0, kJobAt250)}, JobPods{true, false}, "t", *progress);
  ASSERT_TRUE(next);
  EXPECT_EQ((*next)["trainers"], (*progress)["trainers"]);
  EXPECT_FALSE(
      job_progress({pod("master", 0, kJobAt250)}, JobPods{true, false}, "t")->contains("trainers"));
}

// A parameter-server job's world: the workers PS 0 says train (worker i is trainer i + 1), and the
// trainers with the master.
TEST(Progress, APsJobsWorldIsTheWorkersPsZeroSaysTrain) {
  const std::string three_of_four = R"(cifar_ps_trainer_training{trainer="0"} 1
cifar_ps_trainer_training{trainer="1"} 1
cifar_ps_trainer_training{trainer="2"} 0
cifar_ps_trainer_training{trainer="3"} 1
)";
  const auto progress =
      job_progress({pod("master", 0, kJobAt250), ps_pod(three_of_four)}, JobPods{true, false}, "t");
  ASSERT_TRUE(progress);
  EXPECT_EQ((*progress)["world"],
            nlohmann::json::parse(R"({"size": 2, "workers": [0, 2], "trainers": 3})"));
}

}  // namespace
}  // namespace progress_test
