// TF_CONFIG and the local flags -> roles, ranks and addresses.
#include "cluster/cluster.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

namespace cifar::cluster {
namespace {

constexpr const char* kFullCluster = R"({
  "cluster": {"ps": ["j-ps-0.j.ns.svc:2222", "j-ps-1.j.ns.svc:2222"],
              "master": ["j-master-0.j.ns.svc:2222"],
              "worker": ["j-worker-0.j.ns.svc:2222", "j-worker-1.j.ns.svc:2222"],
              "evaluator": ["j-evaluator-0.j.ns.svc:2222"]},
  "task": {"type": "worker", "index": 1}})";

TEST(TfConfig, ReadsTheOperatorsShape) {
  const auto job = parse_tf_config(kFullCluster);
  EXPECT_EQ(job.role, Role::kWorker);
  EXPECT_EQ(job.index, 1);
  ASSERT_EQ(job.cluster.ps.size(), 2U);
  EXPECT_EQ(job.cluster.ps[1], "j-ps-1.j.ns.svc:2222");
  EXPECT_EQ(job.trainer_count(), 3);
  EXPECT_EQ(job.trainer_rank(), 2);  // the master is rank 0
  EXPECT_FALSE(job.is_chief());
  EXPECT_EQ(job.task_name(), "worker 1");
}

TEST(TfConfig, WithoutAMasterWorkerZeroIsTheChief) {
  const auto job = parse_tf_config(
      R"({"cluster":{"ps":["p:1"],"worker":["w0:1","w1:1"]},"task":{"type":"worker","index":0}})");
  EXPECT_EQ(job.trainer_rank(), 0);
  EXPECT_TRUE(job.is_chief());
}

TEST(TfConfig, ChiefIsReadAsMasterAndTheEvaluatorMayBeUnlisted) {
  const auto chief = parse_tf_config(
      R"({"cluster":{"ps":["p:1"],"chief":["c:1"]},"task":{"type":"chief","index":0}})");
  EXPECT_EQ(chief.role, Role::kMaster);
  EXPECT_TRUE(chief.is_chief());
  const auto evaluator =
      parse_tf_config(R"({"cluster":{"ps":["p:1"],"master":["m:1"]},"task":{"type":"evaluator"}})");
  EXPECT_EQ(evaluator.role, Role::kEvaluator);
  EXPECT_FALSE(evaluator.is_trainer());
  EXPECT_THROW((void)evaluator.trainer_rank(), std::logic_error);
}

void expect_rejected(const std::string& text, const std::string& mentions) {
  try {
    parse_tf_config(text);
    FAIL() << "accepted: " << text;
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(mentions), std::string::npos)
        << "message '" << e.what() << "' should mention '" << mentions << "'";
  }
}

TEST(TfConfig, BadInputGetsAMessageNamingTheField) {
  expect_rejected("{not json", "not valid JSON");
  expect_rejected(R"({"task":{"type":"worker"}})", "cluster");
  expect_rejected(R"({"cluster":{"worker":["w:1"]}})", "task");
  expect_rejected(R"({"cluster":{"worker":["w:1"]},"task":{"type":"boss"}})", "task.type");
  expect_rejected(R"({"cluster":{"worker":["w:1"]},"task":{"type":"worker","index":3}})",
                  "not in cluster.worker");
  expect_rejected(R"({"cluster":{"worker":["w:1"]},"task":{"type":"worker","index":-1}})",
                  "task.index");
  expect_rejected(R"({"cluster":{"worker":["no-port"]},"task":{"type":"worker"}})",
                  "cluster.worker[0]");
  expect_rejected(R"({"cluster":{"worker":"w:1"},"task":{"type":"worker"}})", "list");
  expect_rejected(R"({"cluster":{"gpu":["g:1"],"worker":["w:1"]},"task":{"type":"worker"}})",
                  "cluster.gpu");
  expect_rejected(R"({"cluster":{"master":["a:1","b:1"]},"task":{"type":"master"}})",
                  "at most one master");
  expect_rejected(R"({"cluster":{"ps":["p:1"]},"task":{"type":"ps"}})", "no master and no worker");
}

TEST(LocalJob, PortsFollowTheSeedLayout) {
  LocalFlags flags;
  flags.type = "worker";
  flags.ps_count = 2;
  flags.worker_count = 2;
  flags.start_port = 7000;
  flags.worker_index = 1;
  const auto job = local_job(flags);
  EXPECT_EQ(job.cluster.ps, (std::vector<std::string>{"127.0.0.1:7000", "127.0.0.1:7001"}));
  EXPECT_EQ(job.cluster.master, (std::vector<std::string>{"127.0.0.1:7002"}));
  EXPECT_EQ(job.cluster.worker, (std::vector<std::string>{"127.0.0.1:7003", "127.0.0.1:7004"}));
  EXPECT_EQ(job.trainer_rank(), 2);
  EXPECT_EQ(local_port_offset(job), 4);
  flags.type = "evaluator";
  EXPECT_EQ(local_port_offset(local_job(flags)), 5);
  flags.type = "ps";
  flags.ps_index = 1;
  EXPECT_EQ(local_port_offset(local_job(flags)), 1);
}

TEST(LocalJob, IndexesOutsideTheJobAreRejected) {
  LocalFlags flags;
  flags.type = "worker";
  flags.worker_count = 1;
  flags.worker_index = 1;
  EXPECT_THROW(local_job(flags), std::invalid_argument);
  flags.type = "ps";
  flags.ps_index = 3;
  EXPECT_THROW(local_job(flags), std::invalid_argument);
  flags.type = "master";
  flags.start_port = 65535;
  EXPECT_THROW(local_job(flags), std::invalid_argument);
}

}  // namespace
}  // namespace cifar::cluster
