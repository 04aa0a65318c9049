// End-to-end runs of the real cifar-train binary on synthetic CIFAR-format data.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "models/model.h"
#include "storage/store.h"
#include "tests/support/object_store.h"
#include "tests/support/process.h"
#include "tests/support/train_args.h"
#include "train/checkpoint.h"

namespace cifar::train {
namespace {
namespace fs = std::filesystem;
using cifar::testing::ChildProcess;
using cifar::testing::run_process;
using cifar::testing::TempDir;
using cifar::testing::TrainArgs;

std::vector<std::string> train_command(const fs::path& work, const std::string& model_dir,
                                       const std::vector<std::string>& extra) {
  return TrainArgs({CIFAR_TRAIN_BIN})
      .synthetic("simplecnn", 2000, 500)
      .dirs(work, model_dir)
      .single_threaded()
      .no_metrics_server()
      .add({"-b", "32", "--lr", "0.02", "--progress", "lines"})
      .add(extra)
      .args();
}

std::vector<nlohmann::json> monitor_records(const fs::path& model_dir) {
  std::vector<nlohmann::json> records;
  std::ifstream in(model_dir / "monitor.jsonl");
  for (std::string line; std::getline(in, line);) records.push_back(nlohmann::json::parse(line));
  return records;
}

// Every parameter and buffer of the model in `checkpoint`, by name.
std::vector<std::pair<std::string, torch::Tensor>> weights_of(const fs::path& checkpoint) {
  auto model = models::make_model("simplecnn", {});
  CheckpointManager::load_model_file(checkpoint, *model);
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& item : model->named_parameters()) out.emplace_back(item.key(), item.value());
  for (const auto& item : model->named_buffers()) out.emplace_back(item.key(), item.value());
  return out;
}

TEST(Training, LearnsSyntheticDataAndWritesMonitorAndCheckpoints) {
  TempDir work;
  // Without augmentation, so that the running train accuracy measures fitting the data.
  const auto result = run_process(train_command(work.path(), "run", {"-e", "4", "--no-augment"}));
  ASSERT_EQ(result.exit_code, 0) << result.output;

  const auto records = monitor_records(work.path() / "run");
  ASSERT_EQ(records.size(), 4U) << result.output;
  EXPECT_GT(records.back()["train_accuracy"].get<double>(), 0.9) << result.output;
  EXPECT_GT(records.back()["test_accuracy"].get<double>(), 0.85) << result.output;
  EXPECT_LT(records.back()["train_loss"].get<double>(),
            records.front()["train_loss"].get<double>());
  EXPECT_GT(records.back()["images_per_second"].get<double>(), 0);
  EXPECT_EQ(records.back()["step"], 4 * (2000 / 32));

  const CheckpointManager manager(work.path() / "run", "simplecnn", 3);
  const auto checkpoints = manager.list();
  ASSERT_EQ(checkpoints.size(), 3U);  // one an epoch, the newest three kept
  EXPECT_EQ(manager.state_of(checkpoints.back()).epoch, 4);
  EXPECT_NE(result.output.find("test accuracy"), std::string::npos) << result.output;
}

TEST(Training, Bf16AutocastOnTheCpuLearnsAndSaysSo) {
  TempDir work;
  const auto result = run_process(
      train_command(work.path(), "run", {"-e", "2", "--no-augment", "--precision", "bf16"}));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("device cpu, bf16"), std::string::npos) << result.output;
  const auto records = monitor_records(work.path() / "run");
  ASSERT_EQ(records.size(), 2U) << result.output;
  EXPECT_GT(records.back()["test_accuracy"].get<double>(), 0.7) << result.output;
  // The checkpoint's weights are fp32: autocast changes the arithmetic, not what is kept.
  const auto checkpoints = CheckpointManager(work.path() / "run", "simplecnn", 3).list();
  ASSERT_FALSE(checkpoints.empty());
  for (const auto& [name, tensor] : weights_of(work.path() / "run" / checkpoints.back())) {
    if (tensor.is_floating_point()) {
      EXPECT_EQ(tensor.scalar_type(), torch::kFloat) << name;
    }
  }
}

TEST(Training, Fp16OnTheCpuIsABadUsageThatNamesBf16) {
  TempDir work;
  const auto result =
      run_process(train_command(work.path(), "run", {"-e", "1", "--precision", "fp16"}));
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("--precision bf16"), std::string::npos) << result.output;
  EXPECT_FALSE(fs::exists(work.path() / "run" / "monitor.jsonl")) << result.output;
}

TEST(Training, ResumeAfterKillMatchesAnUninterruptedRun) {
  TempDir work;
  const std::vector<std::string> schedule = {
      "-e", "2", "--checkpoint-every", "10", "--keep-checkpoints", "50"};
  const auto straight = run_process(train_command(work.path(), "straight", schedule));
  ASSERT_EQ(straight.exit_code, 0) << straight.output;

  // Kill -9 the second run as soon as it has checkpointed inside its last epoch (62 steps an
  // epoch): epoch 1's record is kept, epoch 2's is written again by the resumed run.
  const auto interrupted_dir = work.path() / "interrupted";
  {
    ChildProcess child(train_command(work.path(), "interrupted", schedule), work.path() / "log");
    const CheckpointManager manager(interrupted_dir, "simplecnn", 50);
    const bool mid_epoch_two = cifar::testing::wait_for(
        [&] {
          const auto files = manager.list();
          return !files.empty() && manager.state_of(files.back()).step >= 70;
        },
        std::chrono::minutes(5));
    ASSERT_TRUE(mid_epoch_two) << cifar::testing::read_file(work.path() / "log");
    child.kill_hard();
    ASSERT_EQ(child.wait(), -SIGKILL) << "the run finished before it could be killed";
  }
  const auto resumed = run_process(train_command(work.path(), "interrupted", [&] {
    auto args = schedule;
    args.emplace_back("--resume");
    return args;
  }()));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resumed from"), std::string::npos) << resumed.output;

  const auto a =
      weights_of(work.path() / "straight" /
                 CheckpointManager(work.path() / "straight", "simplecnn", 50).list().back());
  const auto b = weights_of(interrupted_dir /
                            CheckpointManager(interrupted_dir, "simplecnn", 50).list().back());
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(torch::equal(a[i].second, b[i].second)) << a[i].first << " differs after resume";
  }
  const auto ra = monitor_records(work.path() / "straight");
  const auto rb = monitor_records(interrupted_dir);
  ASSERT_EQ(ra.size(), 2U);
  ASSERT_EQ(rb.size(), 2U);
  for (size_t e = 0; e < ra.size(); ++e) {
    for (const char* key : {"step", "train_loss", "train_accuracy", "test_loss", "test_accuracy"}) {
      EXPECT_EQ(ra[e][key], rb[e][key]) << "epoch " << e + 1 << " " << key;
    }
  }
}

// The step a run that was asked to stop says it stopped after (-1 when it says nothing).
int64_t stopped_after_step(const std::string& log) {
  std::smatch match;
  if (!std::regex_search(log, match,
                         std::regex(R"(stopped on request: \d+ epochs, (\d+) steps)"))) {
    return -1;
  }
  return std::stoll(match[1]);
}

// SIGTERM (a drain, a preemption, a suspend) stops the run at the next step boundary, saves that
// step although no checkpoint is due (epochs are 62 steps; none is at a multiple), and exits
// kExitStopped; the resumed run continues from that very step: nothing is lost.
TEST(Training, SigtermStopsAtAStepBoundaryWithThatStepSavedAndResumeContinuesThere) {
  TempDir work;
  const auto dir = work.path() / "stopped";
  ChildProcess child(train_command(work.path(), "stopped", {"-e", "50"}), work.path() / "log");
  ASSERT_TRUE(cifar::testing::wait_for([&] { return !monitor_records(dir).empty(); },  // epoch 1
                                       std::chrono::minutes(2)))
      << cifar::testing::read_file(work.path() / "log");
  std::this_thread::sleep_for(std::chrono::milliseconds(700));  // inside epoch 2
  child.send(SIGTERM);
  const auto sent = std::chrono::steady_clock::now();
  const int code = child.wait();
  const auto log = cifar::testing::read_file(work.path() / "log");
  ASSERT_EQ(code, 3) << log;  // contract::kExitStopped
  EXPECT_LT(std::chrono::steady_clock::now() - sent, std::chrono::seconds(10));
  const auto step = stopped_after_step(log);
  ASSERT_GT(step, 62) << log;
  const CheckpointManager manager(dir, "simplecnn", 3);
  const auto saved = manager.list();
  ASSERT_FALSE(saved.empty());
  EXPECT_EQ(manager.state_of(saved.back()).step, step) << log;

  const auto resumed = run_process(train_command(
      work.path(), "stopped", {"-e", "50", "--max-steps", std::to_string(step + 2), "--resume"}));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("step " + std::to_string(step) + ")"), std::string::npos)
      << resumed.output;
}

// Outside the steps there is nothing to save, and a second SIGTERM means now: both end the run at
// once with 128 + 15. (A container's PID 1 ignores signals it has no handler for, so the handler
// must exit itself; a process killed by the signal would have no exit code.)
TEST(Training, ASecondSigtermEndsTheRunAtOnce) {
  TempDir work;
  // Steps of 1000 images take a second or more: the second signal comes before the boundary.
  const auto args = TrainArgs({CIFAR_TRAIN_BIN})
                        .synthetic("simplecnn", 3000, 100)
                        .dirs(work.path(), "twice")
                        .single_threaded()
                        .no_metrics_server()
                        .add({"-b", "1000", "-e", "50", "--progress", "lines"})
                        .args();
  ChildProcess child(args, work.path() / "log");
  ASSERT_TRUE(cifar::testing::wait_for(
      [&] {
        return cifar::testing::read_file(work.path() / "log").find("model simplecnn") !=
               std::string::npos;
      },
      std::chrono::minutes(2)));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  child.send(SIGTERM);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  child.send(SIGTERM);
  EXPECT_EQ(child.wait(), 128 + SIGTERM) << cifar::testing::read_file(work.path() / "log");
}

// A checkpoint volume that fills up (a 12 MiB tmpfs: room for one simplecnn checkpoint, ~10 MB
// with its momentum, but not for the next beside it) ends the run with the step, the file and the
// system's reason, in the log and the termination message (no stack trace), keeps the checkpoint
// written before, and leaves no torn file. The tmpfs is mounted in a mount namespace of the run's
// own, so the test lists it from there.
TEST(Training, AFullCheckpointVolumeFailsWithTheStepTheFileAndTheReasonAndKeepsTheLastGoodOne) {
  TempDir work;
  const auto dir = work.path() / "full";
  const auto termination = work.path() / "termination";
  fs::create_directories(dir);
  std::vector<std::string> argv = {
      "unshare",
      "-rm",
      "sh",
      "-c",
      R"(mount -t tmpfs -o size=12m tmpfs "$0" || exit 99; "$@"; code=$?; ls -a "$0"; exit $code)",
      dir.string()};
  const auto train = train_command(
      work.path(), "full",
      {"-e", "1", "--checkpoint-every", "10", "--termination-log", termination.string()});
  argv.insert(argv.end(), train.begin(), train.end());
  const auto result = run_process(argv);
  ASSERT_NE(result.exit_code, 99) << "cannot mount a tmpfs here: " << result.output;
  EXPECT_EQ(result.exit_code, 1) << result.output;
  const auto said = "checkpoint step 20 could not be written to " +
                    (dir / "simplecnn-step-0000000020.pt").string() + ": No space left on device";
  EXPECT_NE(result.output.find(said), std::string::npos) << result.output;
  const auto message = cifar::testing::read_file(termination);
  EXPECT_NE(message.find(said), std::string::npos) << message;
  EXPECT_EQ(message.find("frame #"), std::string::npos) << message;
  // The listing of the volume after the run: the step-10 checkpoint, no temporary file.
  EXPECT_NE(result.output.find("simplecnn-step-0000000010.pt"), std::string::npos) << result.output;
  EXPECT_EQ(result.output.find(".tmp"), std::string::npos) << result.output;
}

// The termination message (what the operator reads once the pod ended) carries the run's final
// figures and the step of the last checkpoint it saved, which is on disk.
TEST(Training, ItsTerminationMessageSaysWhereItEndedAndTheLastCheckpointSaved) {
  TempDir work;
  const auto termination = work.path() / "termination";
  const auto result = run_process(
      train_command(work.path(), "run",
                    {"-e", "1", "--max-steps", "3", "--termination-log", termination.string()}));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const auto message = nlohmann::json::parse(cifar::testing::read_file(termination));
  EXPECT_EQ(message.value("step", -1), 3) << message.dump();
  EXPECT_EQ(message.value("savedStep", -1), 3) << message.dump();
  EXPECT_TRUE(fs::exists(work.path() / "run" / "simplecnn-step-0000000003.pt"));
}

TEST(Training, RefusesToOverwriteAnExistingRunWithoutResume) {
  TempDir work;
  ASSERT_EQ(
      run_process(train_command(work.path(), "run", {"-e", "1", "--max-steps", "3"})).exit_code, 0);
  const CheckpointManager manager(work.path() / "run", "simplecnn", 3);
  const auto before = manager.list();
  ASSERT_FALSE(before.empty());
  const auto again = run_process(train_command(work.path(), "run", {"-e", "1"}));
  EXPECT_EQ(again.exit_code, 2) << again.output;
  EXPECT_NE(again.output.find("--resume"), std::string::npos) << again.output;
  EXPECT_EQ(manager.list(), before);
}

// The arguments of a run that diverges within its first steps.
std::vector<std::string> diverging(std::vector<std::string> extra) {
  std::vector<std::string> argv = {"-e", "3", "--lr", "1000", "--checkpoint-every", "1"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

constexpr char kLingerLine[] = "keeping the metrics endpoint up";

// By default (--metrics-linger 0) a diverged run exits at once, endpoint or not; without an
// endpoint a linger would serve nothing, so there is none.
TEST(Training, DivergenceStopsWithAClearErrorAndKeepsCheckpoints) {
  TempDir work;
  const auto result = run_process(train_command(
      work.path(), "run", diverging({"--metrics-port", "0", "--metrics-bind", "127.0.0.1"})));
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(result.output.find("training diverged"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("lower --lr"), std::string::npos) << result.output;
  EXPECT_EQ(result.output.find(kLingerLine), std::string::npos) << result.output;

  const auto unserved =
      run_process(train_command(work.path(), "unserved", diverging({"--metrics-linger", "5"})));
  EXPECT_EQ(unserved.exit_code, 1) << unserved.output;
  EXPECT_EQ(unserved.output.find(kLingerLine), std::string::npos) << unserved.output;
}

// The value of cifar_loss on a /metrics page as written ("Nan", "+Inf", "2.3"); empty if none.
std::string loss_sample(const std::string& body) {
  static const std::regex kLine(R"((?:^|\n)cifar_loss\{[^}]*\} (\S+))");
  std::smatch m;
  return std::regex_search(body, m, kLine) ? m[1].str() : "";
}

// As Prometheus reads it: NaN and infinities in any case (prometheus-cpp writes "Nan", "+Inf").
bool non_finite(const std::string& sample) {
  char* end = nullptr;
  const double value = std::strtod(sample.c_str(), &end);
  return !sample.empty() && *end == '\0' && !std::isfinite(value);
}

// A diverged run started with --metrics-linger and an endpoint. Returns once its endpoint shows
// the non-finite loss (the CifarTrainLossNaN alert's input), once it lingers without showing it
// (the loss is set before the linger line is logged), or once the run has ended.
class LingeringRun {
 public:
  LingeringRun(const fs::path& work, const std::string& linger_seconds)
      : port_(cifar::testing::free_port()),
        log_(work / "log"),
        child_(train_command(work, "run",
                             diverging({"--metrics-port", std::to_string(port_), "--metrics-bind",
                                        "127.0.0.1", "--metrics-linger", linger_seconds})),
               log_) {
    const std::string url = "http://127.0.0.1:" + std::to_string(port_) + "/metrics";
    cifar::testing::wait_for(
        [&] {
          const bool lingering = log().find(kLingerLine) != std::string::npos;
          const auto sample = loss_sample(cifar::testing::http_get(url));
          if (!sample.empty()) loss_ = sample;
          return non_finite(loss_) || (lingering && !sample.empty()) || !child_.running();
        },
        std::chrono::minutes(3));
  }
  [[nodiscard]] const std::string& loss() const { return loss_; }
  ChildProcess& child() { return child_; }
  [[nodiscard]] std::string log() const { return cifar::testing::read_file(log_); }

 private:
  int port_;
  fs::path log_;
  ChildProcess child_;
  std::string loss_;
};

TEST(Training, ADivergedRunServesItsNonFiniteLossForMetricsLingerSecondsThenFails) {
  TempDir work;
  LingeringRun run(work.path(), "5");
  ASSERT_TRUE(non_finite(run.loss())) << "cifar_loss " << run.loss() << "\n" << run.log();
  const auto seen = std::chrono::steady_clock::now();
  EXPECT_EQ(run.child().wait(), 1) << run.log();
  const auto lingered = std::chrono::steady_clock::now() - seen;  // 5 s less the time to see it
  EXPECT_GT(lingered, std::chrono::seconds(3));
  EXPECT_LT(lingered, std::chrono::seconds(30));
  const auto log = run.log();
  EXPECT_NE(log.find(std::string(kLingerLine) + " 5 s"), std::string::npos) << log;
  EXPECT_NE(log.find("training diverged: loss is"), std::string::npos) << log;
}

// A pod deleted while its trainer lingers still stops at once, failed by its divergence (there
// is nothing to save).
TEST(Training, SigtermEndsALingeringRunAtOnce) {
  TempDir work;
  LingeringRun run(work.path(), "600");
  ASSERT_TRUE(non_finite(run.loss())) << "cifar_loss " << run.loss() << "\n" << run.log();
  const auto sent = std::chrono::steady_clock::now();
  run.child().send(SIGTERM);
  EXPECT_EQ(run.child().wait(), 1) << run.log();
  EXPECT_NE(run.log().find("training diverged"), std::string::npos) << run.log();
  EXPECT_LT(std::chrono::steady_clock::now() - sent, std::chrono::seconds(10));
}

TEST(Training, ResumingWithAnotherModelFailsAndKeepsTheCheckpoints) {
  TempDir work;
  ASSERT_EQ(
      run_process(train_command(work.path(), "run", {"-e", "1", "--max-steps", "2", "-n", "x"}))
          .exit_code,
      0);
  const CheckpointManager manager(work.path() / "run", "x", 3);
  const auto before = manager.list();
  ASSERT_EQ(before.size(), 1U);
  const auto r = run_process(
      train_command(work.path(), "run", {"-e", "1", "-n", "x", "-m", "resnet20", "--resume"}));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("can be restored"), std::string::npos) << r.output;
  EXPECT_EQ(manager.list(), before);
}

TEST(Training, AdamStepScheduleLabelSmoothingAndTheProgressBarRun) {
  TempDir work;
  const auto r = run_process(
      train_command(work.path(), "run",
                    {"-e",         "2",     "--max-steps",     "70",   "--optimizer",       "adam",
                     "--lr",       "0.001", "--schedule",      "step", "--step-epochs",     "1",
                     "--gamma",    "0.5",   "--warmup-epochs", "0.5",  "--label-smoothing", "0.1",
                     "--progress", "bar"}));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("\r\033[Kepoch 1/2 ["), std::string::npos) << r.output;
  const auto records = monitor_records(work.path() / "run");
  ASSERT_EQ(records.size(), 1U);  // epoch 2 stopped at step 70 of 124
  EXPECT_GT(records[0]["test_accuracy"].get<double>(), 0.5) << r.output;
  // Warm-up over the first 31 steps reaches the base rate, which the step schedule then holds.
  EXPECT_DOUBLE_EQ(records[0]["learning_rate"].get<double>(), 0.001);
}

TEST(Training, MaxStepsStopsEarlyAndCheckpointsWhereItStopped) {
  TempDir work;
  const auto result =
      run_process(train_command(work.path(), "run", {"-e", "5", "--max-steps", "7"}));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const CheckpointManager manager(work.path() / "run", "simplecnn", 3);
  const auto files = manager.list();
  ASSERT_EQ(files.size(), 1U);
  const auto state = manager.state_of(files.back());
  EXPECT_EQ(state.step, 7);
  EXPECT_EQ(state.batch_in_epoch, 7);
}

// The fence (train/fence.h): a chief of an older incarnation, still running when a newer one
// takes the run over (a pod left on a cut-off node beside its replacement), stops at its next
// write instead of writing beside it; one started after the newer one never begins.
TEST(Training, AChiefOfAnOlderIncarnationStopsOnceANewerOneHasTakenTheRunOver) {
  TempDir work;
  const auto dir = work.path() / "run";
  const auto chief = [&](int incarnation, const std::vector<std::string>& extra) {
    auto args = train_command(work.path(), "run", extra);
    args.insert(args.begin(), {"env", "CIFAR_INCARNATION=" + std::to_string(incarnation)});
    return args;
  };
  ChildProcess old(chief(1, {"-e", "50", "--checkpoint-every", "5"}), work.path() / "old.log");
  ASSERT_TRUE(cifar::testing::wait_for(
      [&] { return !CheckpointManager(dir, "simplecnn", 3).list().empty(); },
      std::chrono::minutes(2)))
      << cifar::testing::read_file(work.path() / "old.log");
  ChildProcess replacement(chief(2, {"-e", "3", "--checkpoint-every", "5", "--resume"}),
                           work.path() / "new.log");
  const int old_code = old.wait();
  const auto old_log = cifar::testing::read_file(work.path() / "old.log");
  EXPECT_EQ(old_code, 4) << old_log;  // contract::kExitReplaced
  EXPECT_NE(old_log.find("this pod was replaced by incarnation 2; stopping"), std::string::npos)
      << old_log;
  ASSERT_EQ(replacement.wait(), 0) << cifar::testing::read_file(work.path() / "new.log");

  // After the takeover every checkpoint is the replacement's, and every epoch is recorded once.
  std::ifstream fence_file(dir / "simplecnn.chief.fence");
  const auto fence = nlohmann::json::parse(fence_file);
  EXPECT_EQ(fence["incarnation"], 2);
  const auto resumed_at = fence["resumed_step"].get<int64_t>();
  const CheckpointManager manager(dir, "simplecnn", 3);
  const auto files = manager.list();
  ASSERT_FALSE(files.empty());
  for (const auto& file : files) {
    const auto state = manager.state_of(file);
    EXPECT_EQ(state.written_by, state.step > resumed_at ? 2 : 1) << file;
  }
  std::vector<int64_t> epochs;
  for (const auto& record : monitor_records(dir)) epochs.push_back(record["epoch"]);
  EXPECT_EQ(epochs, (std::vector<int64_t>{1, 2, 3}));

  // A pod of the older incarnation that starts only now never begins.
  const auto late = run_process(chief(1, {"-e", "3", "--resume"}));
  EXPECT_EQ(late.exit_code, 4) << late.output;
  EXPECT_NE(late.output.find("this pod was replaced by incarnation 2; stopping"), std::string::npos)
      << late.output;
}

// -md s3://...: the same run with a bucket for its directory (SeaweedFS, the object_store
// fixture): checkpoints, the monitor log and a resume all go through the bucket.
std::vector<std::string> with_environment(const std::vector<std::string>& environment,
                                          const std::vector<std::string>& command) {
  std::vector<std::string> out{"env"};
  out.insert(out.end(), environment.begin(), environment.end());
  out.insert(out.end(), command.begin(), command.end());
  return out;
}

TEST(TrainingInObjectStorage, CheckpointsAndAResumeGoThroughTheBucket) {
  TempDir work;
  const auto store = cifar::testing::ObjectStore::from_fixture();
  const auto run = std::string("s3://") + cifar::testing::ObjectStore::kBucket + "/" +
                   cifar::testing::unique_prefix("training") + "/run";
  const auto first = run_process(with_environment(
      store.environment(),
      train_command(work.path(), "unused", {"-md", run, "-e", "2", "--max-steps", "70"})));
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const auto resumed = run_process(
      with_environment(store.environment(),
                       train_command(work.path(), "unused", {"-md", run, "-e", "2", "--resume"})));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resumed from " + run + "/simplecnn-step-0000000070.pt"),
            std::string::npos)
      << resumed.output;
  EXPECT_FALSE(fs::exists(work.path() / "unused"));
  EXPECT_FALSE(fs::exists("s3:"));  // nothing written to a local directory of that name

  store.export_environment();
  const CheckpointManager checkpoints(run, "simplecnn", 3);
  const auto names = checkpoints.list();
  ASSERT_EQ(names.size(), 3U);  // 70, then epoch 2's steps: the newest three kept
  EXPECT_EQ(names.back(), "simplecnn-step-0000000124.pt");
  EXPECT_EQ(checkpoints.state_of(names.back()).epoch, 2);
  const auto monitor = storage::open_store(run)->get("monitor.jsonl");
  ASSERT_TRUE(monitor);
  EXPECT_EQ(std::count(monitor->begin(), monitor->end(), '\n'), 2) << *monitor;
}

// A checkpoint object that is not whole (written by a tool that cut it short, or damaged since: a
// PUT of ours is whole or absent) is passed over for the next older one, as a torn file is.
TEST(TrainingInObjectStorage, ATornNewestCheckpointInTheBucketIsPassedOver) {
  const auto store = cifar::testing::ObjectStore::from_fixture();
  store.export_environment();
  const auto run = std::string("s3://") + cifar::testing::ObjectStore::kBucket + "/" +
                   cifar::testing::unique_prefix("torn");
  auto model = models::make_model("simplecnn", {});
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  const CheckpointManager checkpoints(run, "simplecnn", 3);
  TrainState state;
  state.step = 10;
  checkpoints.save(*model, optimizer, state);
  checkpoints.wait_until_saved();
  state.step = 20;
  checkpoints.save(*model, optimizer, state);
  checkpoints.wait_until_saved();
  const auto newest = checkpoints.list().back();
  const auto bytes = checkpoints.read(newest);
  ASSERT_TRUE(bytes);
  storage::open_store(run)->put(newest, bytes->substr(0, bytes->size() / 2));

  const auto readable = checkpoints.newest_readable();
  ASSERT_TRUE(readable);
  EXPECT_EQ(readable->first, "simplecnn-step-0000000010.pt");
  const auto restored = checkpoints.load_latest(*model, optimizer);
  ASSERT_TRUE(restored);
  EXPECT_EQ(restored->step, 10);
}

// What a user sees when the bucket cannot be used: exit 5 (contract::kExitStoreUnavailable) at
// once, a message naming the bucket, the endpoint and the server's code, and never the secret.
TEST(TrainingInObjectStorage, AStoreThatRefusesEndsTheRunAtOnceSayingWhy) {
  TempDir work;
  const auto store = cifar::testing::ObjectStore::from_fixture();
  const auto train = [&](const std::string& model_dir, std::vector<std::string> environment,
                         std::vector<std::string> flags = {}) {
    flags.insert(flags.begin(), {"-md", model_dir});
    return run_process(with_environment(environment, train_command(work.path(), "unused", flags)));
  };
  auto wrong_secret = store.environment();
  wrong_secret.back() = "AWS_SECRET_ACCESS_KEY=not-the-secret-key-at-all";
  const auto refused =
      train(std::string("s3://") + cifar::testing::ObjectStore::kBucket + "/x", wrong_secret);
  EXPECT_EQ(refused.exit_code, 5) << refused.output;
  EXPECT_NE(refused.output.find("checkpoint store s3://cifar-tests/x unavailable: "),
            std::string::npos)
      << refused.output;
  EXPECT_NE(refused.output.find("SignatureDoesNotMatch"), std::string::npos) << refused.output;
  EXPECT_NE(refused.output.find(store.endpoint), std::string::npos) << refused.output;
  EXPECT_EQ(refused.output.find("not-the-secret-key-at-all"), std::string::npos);

  const auto missing = train("s3://no-such-bucket/x", store.environment());
  EXPECT_EQ(missing.exit_code, 5) << missing.output;
  EXPECT_NE(missing.output.find("NoSuchBucket"), std::string::npos) << missing.output;
  EXPECT_NE(missing.output.find("s3://no-such-bucket"), std::string::npos) << missing.output;

  auto nowhere = store.environment();
  nowhere.front() = "AWS_ENDPOINT_URL=http://127.0.0.1:" + std::to_string(testing::free_port());
  // A store that does not answer may be briefly away: it is waited for, up to the bound.
  const auto unanswered = train("s3://cifar-tests/x", nowhere, {"--max-unsaved-seconds", "3"});
  EXPECT_EQ(unanswered.exit_code, 5) << unanswered.output;
  EXPECT_NE(unanswered.output.find("no answer"), std::string::npos) << unanswered.output;
  EXPECT_NE(unanswered.output.find("trying again for up to 3 s"), std::string::npos)
      << unanswered.output;
  EXPECT_NE(unanswered.output.find("longer than the job allows (checkpoint.maxUnsavedSeconds, "
                                   "--max-unsaved-seconds 3)"),
            std::string::npos)
      << unanswered.output;
  // What refuses is never waited for: neither wrong keys nor a missing bucket said so.
  EXPECT_EQ(refused.output.find("trying again"), std::string::npos) << refused.output;
  EXPECT_EQ(missing.output.find("trying again"), std::string::npos) << missing.output;

  const auto no_keys = train("s3://cifar-tests/x", {"AWS_ENDPOINT_URL=" + store.endpoint});
  EXPECT_EQ(no_keys.exit_code, 2) << no_keys.output;
  EXPECT_NE(no_keys.output.find("needs credentials: set AWS_ACCESS_KEY_ID"), std::string::npos)
      << no_keys.output;

  const auto bad_uri = train("s3://Not_A_Bucket/x", store.environment());
  EXPECT_EQ(bad_uri.exit_code, 2) << bad_uri.output;
  EXPECT_NE(bad_uri.output.find("is not a bucket name S3 allows"), std::string::npos)
      << bad_uri.output;
}

}  // namespace
}  // namespace cifar::train
