// The operator killed mid-run (SIGKILL to its container's process): the kubelet restarts it, and
// the new instance takes the job up from the API where it was, creating and deleting nothing.
// This case takes the whole cluster (ctest resource `cluster`, both slots): while the operator is
// down, no other test's job is reconciled.
#include <gtest/gtest.h>

#include <csignal>
#include <map>

#include "tests/e2e/cluster_fixture.h"

namespace cifar::e2e {
namespace {

TEST_F(Cluster, TheOperatorKilledMidRunResumesWhereItWas) {
  data_and_checkpoint_volumes();
  // Two epochs: the job may even end while the operator is down; only a new one can say so.
  submit("op", kPsAsync, kPsReplicas, "", "cifar10", 2, kAsyncPsLearningRate);
  ASSERT_TRUE(wait_for_state("op", "Running", seconds(120)));
  ASSERT_TRUE(wait_until_training("op"));
  std::map<std::string, std::string> uids;
  for (const auto& p : pods_of("op")) uids[p["metadata"]["name"]] = p["metadata"]["uid"];
  const auto operators = client_.list(cifar::kube::pods("cifartrain-system"),
                                      {"app.kubernetes.io/name=cifar-operator", "", ""})["items"];
  ASSERT_EQ(operators.size(), 1U);
  const auto operator_pod = operators[0]["metadata"]["name"].get<std::string>();
  const int restarts_before =
      operators[0]["status"]["containerStatuses"][0].value("restartCount", 0);
  const auto status_path = cifar::kube::pods("cifartrain-system").named(operator_pod);
  const int pid = pid_of_container(client_.get(status_path));
  ASSERT_GT(pid, 0);
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  ASSERT_EQ(phase("op-master-0"), "Running");  // mid-run: only a new operator can end the job
  // The kubelet restarts it; the new instance takes the job up from the API.
  EXPECT_TRUE(wait_for(
      [&] {
        const auto s = client_.get(status_path)["status"]["containerStatuses"][0];
        return s.value("restartCount", 0) > restarts_before && s.value("ready", false);
      },
      seconds(120)));
  ASSERT_TRUE(wait_for_state("op", "Succeeded", seconds(300))) << state("op");
  // Nothing was recreated or duplicated: the same pods (those still there) as before the kill.
  for (const auto& p : pods_of("op")) {
    const auto name = p["metadata"]["name"].get<std::string>();
    ASSERT_TRUE(uids.count(name)) << "new pod " << name;
    EXPECT_EQ(uids[name], p["metadata"]["uid"]) << name;
  }
  EXPECT_EQ(status_of("op").value("restarts", 0), 0);
}

}  // namespace
}  // namespace cifar::e2e
