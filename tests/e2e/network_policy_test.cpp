// The job's NetworkPolicy, as the operator writes it, enforced by the local cluster's
// NetworkPolicy agents (kube-network-policies on every node, deploy/local-cluster/node.sh): a pod
// outside the job, in its namespace or another, on either node, opens none of the training ports
// of a running job's pods (the PS port, the c10d store port, a Gloo pair port), while the job's
// own pods reach them and anyone reaches the metrics port. The connections are made for real from
// the other pods' network namespaces (this test runs as root on the nodes' machine), with the
// host's bash: a pause container has no shell.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <future>
#include <set>
#include <sstream>

#include "tests/e2e/cluster_fixture.h"

namespace cifar::e2e {
namespace {

constexpr int kPsPort = 2222;
constexpr int kC10dStorePort = 29500;
constexpr int kMetricsPort = 9464;

class EnforcedNetworkPolicy : public Cluster {
 protected:
  void TearDown() override {
    if (!other_ns_.empty()) kubectl({"delete", "namespace", other_ns_, "--wait=false"});
    if (!admin_policy_.empty()) kubectl({"delete", "adminnetworkpolicy", admin_policy_});
    Cluster::TearDown();
  }

  // The local port of a Gloo pair of process `pid`'s rank: its established connection to the
  // other rank at `peer_ip` that is neither the c10d store's nor metrics (from /proc/PID/net/tcp,
  // its network namespace's table; addresses in hex, little-endian). Gloo listens for a pair only
  // until the pair connects: the port then carries the pair's connection and nothing listens.
  static int gloo_pair_port(int pid, const std::string& peer_ip) {
    unsigned a = 0, b = 0, c = 0, d = 0;
    std::sscanf(peer_ip.c_str(), "%u.%u.%u.%u", &a, &b, &c, &d);
    char peer_hex[9];
    std::snprintf(peer_hex, sizeof peer_hex, "%02X%02X%02X%02X", d, c, b, a);
    std::ifstream table("/proc/" + std::to_string(pid) + "/net/tcp");
    std::string line;
    std::getline(table, line);  // the header
    while (std::getline(table, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state;
      fields >> slot >> local >> remote >> state;
      const int local_port = std::stoi(local.substr(local.find(':') + 1), nullptr, 16);
      const int remote_port = std::stoi(remote.substr(remote.find(':') + 1), nullptr, 16);
      if (state == "01" && remote.rfind(peer_hex, 0) == 0 &&
          std::set<int>{local_port, remote_port}.count(kC10dStorePort) == 0 &&
          std::set<int>{local_port, remote_port}.count(kMetricsPort) == 0) {
        return local_port;
      }
    }
    return 0;
  }

  std::string other_ns_;
  std::string admin_policy_;  // cluster-scoped: deleted with the case
};

TEST_F(EnforcedNetworkPolicy, NoPodOutsideTheJobOpensItsTrainingPortsOnEitherNode) {
  data_and_checkpoint_volumes();
  const std::string spread =
      "  runPolicy:\n    cleanPodPolicy: None\n    schedulingPolicy: {spreadAcrossNodes: "
      "Required}\n";
  submit("ps", kPsAsync, kPsReplicas, spread, "cifar10", 8, kAsyncPsLearningRate);
  submit("ar", kAllReduce, "    Worker: {replicas: 2}\n", spread, "cifar10", 8);
  ASSERT_TRUE(wait_until_training("ps")) << diagnose("ps");
  ASSERT_TRUE(wait_until_training("ar")) << diagnose("ar");
  const auto ps_placed = placement("ps");
  const auto ar_placed = placement("ar");
  ASSERT_EQ(nodes_of(ps_placed).size(), 2U);
  ASSERT_EQ(nodes_of(ar_placed).size(), 2U);

  // The targets: every training port of the jobs' pods, on both nodes, and what the job's own
  // pod meets there.
  struct Target {
    std::string what, ip;
    int port;
    std::string insider;
    Reach for_insider;
  };
  const auto ip_of = [&](const std::string& name) {
    return pod(name)["status"].value("podIP", "");
  };
  std::vector<Target> targets = {
      {"ps-ps-0's PS port", ip_of("ps-ps-0"), kPsPort, "ps-master-0", Reach::kOpened},
      {"ar-worker-0's c10d store port", ip_of("ar-worker-0"), kC10dStorePort, "ar-worker-1",
       Reach::kOpened}};
  const int gloo_port = gloo_pair_port(container_pid("ar-worker-0"), ip_of("ar-worker-1"));
  ASSERT_GT(gloo_port, 0) << "ar-worker-0 has no Gloo pair connection to ar-worker-1";
  targets.push_back({"ar-worker-0's Gloo pair port " + std::to_string(gloo_port),
                     ip_of("ar-worker-0"), gloo_port, "ar-worker-1", Reach::kRefused});

  // The outsiders: a pod without the job's labels in the job's namespace, and one in another
  // namespace, on each node.
  other_ns_ =
      cifar::testing::create_test_namespace(client_, "e2e-other", cifar::testing::kRestricted);
  struct Outsider {
    std::string where;
    int pid;
  };
  std::vector<Outsider> outsiders;
  for (const auto& node : nodes_of(ps_placed)) {
    const auto name = "outsider-" + std::to_string(outsiders.size());
    idle_pod(name, ns_, node, "{app: outsider}");
    outsiders.push_back({"the job's namespace on " + node, pid_in(ns_, name)});
    idle_pod(name, other_ns_, node, "{app: outsider}");
    outsiders.push_back({"another namespace on " + node, pid_in(other_ns_, name)});
  }
  for (const auto& outsider : outsiders) ASSERT_GT(outsider.pid, 0) << outsider.where;

  // Every attempt at once (each dropped one takes its 3 s).
  struct Attempt {
    std::string what;
    Reach expected;
    std::future<Reach> met;
  };
  std::vector<Attempt> attempts;
  for (const auto& outsider : outsiders) {
    for (const auto& target : targets) {
      attempts.push_back(
          {outsider.where + " -> " + target.what, Reach::kTimedOut,
           std::async(std::launch::async, reach, outsider.pid, target.ip, target.port)});
    }
    attempts.push_back(
        {outsider.where + " -> ps-ps-0's metrics port", Reach::kOpened,
         std::async(std::launch::async, reach, outsider.pid, ip_of("ps-ps-0"), kMetricsPort)});
  }
  // The job's own pods reach the same ports (the ranks across the nodes): the check tells a port
  // the policy closes from one it leaves open.
  for (const auto& target : targets) {
    const int pid = container_pid(target.insider);
    ASSERT_GT(pid, 0) << target.insider;
    attempts.push_back({target.insider + " -> " + target.what, target.for_insider,
                        std::async(std::launch::async, reach, pid, target.ip, target.port)});
  }
  for (auto& attempt : attempts) {
    EXPECT_STREQ(name_of(attempt.met.get()), name_of(attempt.expected)) << attempt.what;
  }

  // Both jobs trained on through it, across both nodes, and the operator's progress scrape of
  // the metrics port kept working: each job's step, as the operator scraped it, moves past where
  // it was once the attempts ended. (Their runs to Succeeded under the enforced policy are every
  // other case's; here the rest of the run would only be CI time.)
  EXPECT_GT(status_of("ps")["progress"].value("imagesPerSecond", 0.0), 0.0) << diagnose("ps");
  for (const auto* job : {"ps", "ar"}) {
    const int step = status_of(job)["progress"].value("step", 0);
    EXPECT_TRUE(wait_for(
        [&] {
          return status_of(job)["progress"].value("step", 0) > step || state(job) == "Succeeded";
        },
        seconds(120)))
        << job << " stayed at step " << step << diagnose(job);
    EXPECT_NE(state(job), "Failed") << diagnose(job);
  }
}

// A rule the job's own NetworkPolicy cannot override: the cluster administrator's
// AdminNetworkPolicy (enforced by the same agents) denies every connection to the job's PS on its
// port. Its trainers' packets are dropped, not refused: the first trainer to give up says which
// peer it could not reach and that a NetworkPolicy may be why, and under restartPolicy ExitCode
// (exit 1 is permanent) the job fails on that, with the trainer's words in its status; no restart
// loop, no silent hang.
TEST_F(EnforcedNetworkPolicy, AJobWhosePsTrafficAnAdminPolicyDropsFailsNamingThePsAndThePolicy) {
  data_and_checkpoint_volumes();
  admin_policy_ = ns_ + "-no-ps";
  apply(
      "apiVersion: policy.networking.k8s.io/v1alpha1\nkind: AdminNetworkPolicy\n"
      "metadata: {name: " +
      admin_policy_ +
      "}\n"
      "spec:\n  priority: 10\n  subject:\n    pods:\n"
      "      namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: " +
      ns_ +
      "}}\n"
      "      podSelector: {matchLabels: {cifartrain.io/job-name: blocked, "
      "cifartrain.io/replica-type: ps}}\n"
      "  ingress:\n  - name: no-ps-traffic\n    action: Deny\n    from: [{namespaces: {}}]\n"
      "    ports: [{portNumber: {protocol: TCP, port: " +
      std::to_string(kPsPort) + "}}]\n");
  submit("blocked", kPsAsync, "    PS: {replicas: 1}\n    Master: {replicas: 1}\n",
         "  runPolicy: {restartPolicy: ExitCode}\n");
  // A trainer retries an unreachable PS for 120 s (--ps-retry-seconds) before it gives up.
  ASSERT_TRUE(wait_for_state("blocked", "Failed", seconds(300))) << diagnose("blocked");
  const auto status = status_of("blocked");
  EXPECT_EQ(status.value("reason", ""), "PodFailed") << status.dump();
  const auto message = status.value("message", "");
  for (const std::string expected :
       {"blocked-master-0 failed with exit code 1", "PS shard 0 (", "blocked-ps-0",
        "was neither accepted nor refused in 3 s: its packets are dropped on the way; a "
        "NetworkPolicy (or a firewall) that drops the job's traffic may be why"}) {
    EXPECT_NE(message.find(expected), std::string::npos) << expected << "\n" << message;
  }
  EXPECT_EQ(status.value("restarts", -1), 0) << status.dump();
}

}  // namespace
}  // namespace cifar::e2e
