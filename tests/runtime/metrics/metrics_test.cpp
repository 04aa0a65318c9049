#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <regex>

#include "metrics/runtime_metrics.h"
#include "tests/support/process.h"
#include "tests/support/train_args.h"

namespace cifar::metrics {
namespace {
using cifar::testing::http_get;

// The runtime metrics (contract/metrics.h) of a single process.
const std::vector<std::string> kNamedMetrics = {
    "cifar_steps_total",        "cifar_images_total",      "cifar_loss",
    "cifar_train_accuracy",     "cifar_test_accuracy",     "cifar_epoch",
    "cifar_step_seconds",       "cifar_images_per_second", "cifar_data_wait_seconds_total",
    "cifar_checkpoint_seconds", "cifar_checkpoints_total", "cifar_job_step",
    "cifar_job_total_steps"};

// The value of `name{...labels...}` in a Prometheus text exposition, NaN if absent.
double sample(const std::string& exposition, const std::string& name) {
  const std::regex line("(^|\\n)" + name + "\\{[^}]*\\} ([0-9.eE+-]+)");
  std::smatch m;
  if (!std::regex_search(exposition, m, line)) return std::nan("");
  return std::stod(m[2]);
}

TEST(RuntimeMetrics, ServesEveryNamedMetricWithJobRoleIndexLabels) {
  RuntimeMetrics metrics({"myjob", "worker", "3"}, "127.0.0.1:0");
  ASSERT_NE(metrics.port(), 0);
  metrics.set_epoch(2);
  metrics.record_step({0.2, 0.01, 64, 1.5, 0.25, 320});
  metrics.record_step({0.1, 0.02, 64, 1.25, 0.5, 640});
  metrics.set_test_accuracy(0.75);
  metrics.record_checkpoint(0.3);
  metrics.set_job_position(42, 600);

  const auto body = http_get("http://127.0.0.1:" + std::to_string(metrics.port()) + "/metrics");
  ASSERT_FALSE(body.empty());
  for (const auto& name : kNamedMetrics) {
    EXPECT_NE(body.find("# TYPE " + name), std::string::npos) << name << "\n" << body;
  }
  EXPECT_NE(body.find(R"(cifar_steps_total{index="3",job="myjob",role="worker"} 2)"),
            std::string::npos)
      << body;
  EXPECT_DOUBLE_EQ(sample(body, "cifar_images_total"), 128);
  EXPECT_DOUBLE_EQ(sample(body, "cifar_loss"), 1.25);
  EXPECT_DOUBLE_EQ(sample(body, "cifar_test_accuracy"), 0.75);
  EXPECT_DOUBLE_EQ(sample(body, "cifar_epoch"), 2);
  EXPECT_DOUBLE_EQ(sample(body, "cifar_job_step"), 42);
  EXPECT_DOUBLE_EQ(sample(body, "cifar_job_total_steps"), 600);
  EXPECT_NEAR(sample(body, "cifar_data_wait_seconds_total"), 0.03, 1e-12);
  EXPECT_DOUBLE_EQ(sample(body, "cifar_step_seconds_count"), 2);
  EXPECT_NEAR(sample(body, "cifar_step_seconds_sum"), 0.3, 1e-12);
}

// A diverged step publishes its loss and nothing else. prometheus-cpp writes NaN as "Nan" and
// infinities as "+Inf"/"-Inf"; Prometheus parses the value case-insensitively (Go's ParseFloat).
TEST(RuntimeMetrics, SetLossPublishesANonFiniteLossAlone) {
  RuntimeMetrics metrics({}, "127.0.0.1:0");
  metrics.record_step({0.1, 0, 64, 1.25, 0.5, 640});
  const std::string url = "http://127.0.0.1:" + std::to_string(metrics.port()) + "/metrics";
  const std::string line = R"(cifar_loss{index="0",job="local",role="master"} )";
  metrics.set_loss(std::nan(""));
  auto body = http_get(url);
  EXPECT_NE(body.find(line + "Nan\n"), std::string::npos) << body;
  EXPECT_DOUBLE_EQ(sample(body, "cifar_steps_total"), 1);
  metrics.set_loss(-std::numeric_limits<double>::infinity());
  body = http_get(url);
  EXPECT_NE(body.find(line + "-Inf\n"), std::string::npos) << body;
}

TEST(RuntimeMetrics, NotServedWithoutAnAddress) {
  RuntimeMetrics metrics({}, "");
  EXPECT_EQ(metrics.port(), 0);
  metrics.record_step({0.1, 0, 1, 1, 1, 1});  // still safe to record
}

// The real binary serves them while it trains.
TEST(RuntimeMetrics, TrainingProcessServesLiveMetrics) {
  cifar::testing::TempDir work;
  const int port = cifar::testing::free_port();
  const auto argv = cifar::testing::TrainArgs({CIFAR_TRAIN_BIN})
                        .synthetic("simplecnn", 2000, 200)
                        .add({"-md", (work.path() / "m").string(), "-e", "100", "-b", "32",
                              "--threads", "1", "--metrics-port", std::to_string(port),
                              "--metrics-bind", "127.0.0.1", "-n", "live", "--progress", "none"})
                        .args();
  cifar::testing::ChildProcess child(argv, work.path() / "log");
  const std::string url = "http://127.0.0.1:" + std::to_string(port) + "/metrics";
  std::string body;
  const bool served = cifar::testing::wait_for(
      [&] {
        body = http_get(url);
        return sample(body, "cifar_steps_total") >= 3 || !child.running();
      },
      std::chrono::minutes(3));
  ASSERT_TRUE(served && child.running()) << body << cifar::testing::read_file(work.path() / "log");
  for (const auto& name : kNamedMetrics) {
    EXPECT_NE(body.find("# TYPE " + name), std::string::npos) << name;
  }
  EXPECT_NE(body.find(R"(job="live",role="master")"), std::string::npos) << body;
  EXPECT_GT(sample(body, "cifar_images_per_second"), 0);
  EXPECT_DOUBLE_EQ(sample(body, "cifar_epoch"), 1);
  // The job's position: 100 epochs of 2000 / 32 = 62 batches (the last, partial one is dropped).
  EXPECT_DOUBLE_EQ(sample(body, "cifar_job_total_steps"), 6200);
  EXPECT_GE(sample(body, "cifar_job_step"), 2);  // set just after the step counter
  child.kill_hard();
}

TEST(RuntimeMetrics, APortInUseIsAClearError) {
  RuntimeMetrics first({}, "127.0.0.1:0");
  const auto r = cifar::testing::run_process(
      {CIFAR_TRAIN_BIN, "-d", "synthetic", "--metrics-bind", "127.0.0.1", "--metrics-port",
       std::to_string(first.port()), "-md", (cifar::testing::TempDir().path() / "m").string()});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("cannot serve metrics on 127.0.0.1:" + std::to_string(first.port())),
            std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace cifar::metrics
