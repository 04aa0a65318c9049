// Jobs across the local cluster's two nodes (deploy/local-cluster: node 2 is a kubelet with its
// own containerd, network namespace and cgroup root): a job's pods are spread over both nodes
// (spreadAcrossNodes) and find each other across them. These cases share the cluster with
// others; the death of a node is node_death_test.cpp.
#include <gtest/gtest.h>

#include <set>

#include "tests/e2e/cluster_fixture.h"

namespace cifar::e2e {
namespace {

using AcrossNodes = Cluster;

TEST_F(AcrossNodes, AParameterServerJobRunsWithItsPodsOnBothNodes) {
  data_and_checkpoint_volumes();
  submit("ps", kPsAsync, kPsReplicas,
         "  runPolicy:\n    cleanPodPolicy: None\n"
         "    schedulingPolicy: {spreadAcrossNodes: Required}\n");
  ASSERT_TRUE(wait_for_state("ps", "Succeeded", seconds(300))) << diagnose("ps");
  const auto placed = placement("ps");
  EXPECT_EQ(placed.size(), 5U);
  EXPECT_EQ(nodes_of(placed).size(), 2U) << "pods on one node only";
  // Every pod ran where it was placed (a container started and ended there).
  for (const auto& [pod_name, node_name] : placed) {
    EXPECT_EQ(pod(pod_name)["status"]["containerStatuses"][0]["state"].contains("terminated") ||
                  phase(pod_name) == "Running",
              true)
        << pod_name;
  }
  EXPECT_EQ(phase("ps-master-0"), "Succeeded");
}

TEST_F(AcrossNodes, AnAllReduceJobsRanksReachEachOtherAtTheirPodsAddresses) {
  data_and_checkpoint_volumes();
  submit("ar", kAllReduce, "    Worker: {replicas: 2}\n",
         "  runPolicy:\n    cleanPodPolicy: None\n"
         "    schedulingPolicy: {spreadAcrossNodes: Required}\n");
  ASSERT_TRUE(wait_for_state("ar", "Succeeded", seconds(300))) << diagnose("ar");
  const auto placed = placement("ar");
  ASSERT_EQ(nodes_of(placed).size(), 2U) << "both ranks on one node";
  // Each rank's Gloo device is on its pod's own address (what its DNS name resolves to), on its
  // node's pod network: 10.244.0.x and 10.244.1.x.
  std::set<std::string> subnets;
  for (const auto& rank : {std::string("ar-worker-0"), std::string("ar-worker-1")}) {
    const auto ip = pod(rank)["status"].value("podIP", "");
    ASSERT_FALSE(ip.empty()) << rank;
    subnets.insert(ip.substr(0, ip.rfind('.')));
    const auto log = kubectl({"logs", rank, "-n", ns_}).output;
    const auto device = log.find("gloo device");
    ASSERT_NE(device, std::string::npos) << log;
    const auto line = log.substr(device, log.find('\n', device) - device);
    EXPECT_NE(line.find(ip), std::string::npos) << rank << " (" << ip << "): " << line;
  }
  EXPECT_EQ(subnets.size(), 2U);
}

}  // namespace
}  // namespace cifar::e2e
