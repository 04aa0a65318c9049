// End to end on the local cluster (deploy/local-cluster, two nodes: kubelets, containerd, CoreDNS,
// the operator as a Deployment from its image): CifarTrainJobs applied with kubectl run as real
// pods from the runtime image on a slice of real CIFAR-10, find each other by the DNS names the
// operator injects, and reach Succeeded; faults are made for real (a pod deleted, a process
// killed) and the job's policy is asserted (the operator killed: operator_kill_test.cpp). A failing
// test prints the job's status, its Events and its pods' logs.
#include <gtest/gtest.h>

#include <csignal>
#include <cstdio>
#include <map>
#include <set>
#include <thread>

#include "contract/labels.h"
#include "tests/e2e/cluster_fixture.h"

namespace cifar::e2e {
namespace {

TEST_F(Cluster, AParameterServerJobRunsToSucceededAndReportsItsProgress) {
  data_and_checkpoint_volumes();
  // Three epochs (~40 s): time for the evaluator to evaluate and the operator to read it.
  submit("ps", kPsSync, kPsReplicas, "", "cifar10", 3);
  // `kubectl get ctj` fills its progress columns while the job runs: epoch, progress and the
  // time to go, accuracy (from the evaluator), images/s.
  std::string table;
  json running;
  EXPECT_TRUE(wait_for(
      [&] {
        table = kubectl({"get", "ctj", "ps", "-n", ns_, "--no-headers"}).output;
        running = status_of("ps").value("progress", json::object());
        return running.contains("testAccuracy") && running.contains("imagesPerSecond") &&
               running.contains("estimatedRemainingSeconds") &&
               table.find("<none>") == std::string::npos;
      },
      seconds(240)))
      << table;
  EXPECT_NE(table.find("Running"), std::string::npos) << table;
  EXPECT_GE(running.value("progressPercentage", -1), 0) << running.dump();
  EXPECT_LE(running.value("progressPercentage", 101), 100) << running.dump();
  // The PS serves over mutual TLS with the parameter servers' own certificate (the operator's, per
  // job; the trainers have theirs). Read while the job runs: a PS still running when the job ends
  // is deleted (cleanPodPolicy Running).
  const auto ps_log = kubectl({"logs", "ps-ps-0", "-n", ns_}).output;
  EXPECT_NE(
      ps_log.find("mutual TLS with the job's certificate \"" + ns_ + "/ps parameter server\""),
      std::string::npos)
      << ps_log;
  ASSERT_TRUE(wait_for_state("ps", "Succeeded", seconds(300))) << state("ps");
  const auto status = status_of("ps");
  // The end, not the last scrape: 100%, no time to go, and the accuracy of the final checkpoint,
  // which the evaluator got to evaluate before the job ended.
  EXPECT_EQ(status["progress"].value("progressPercentage", 0), 100) << status.dump();
  EXPECT_FALSE(status["progress"].contains("estimatedRemainingSeconds")) << status.dump();
  EXPECT_EQ(phase("ps-evaluator-0"), "Succeeded");
  const double accuracy = status["progress"]["testAccuracy"];
  EXPECT_GT(accuracy, 0.0);
  EXPECT_LE(accuracy, 1.0);
  const auto evaluator_log = kubectl({"logs", "ps-evaluator-0", "-n", ns_}).output;
  char final_accuracy[32];
  std::snprintf(final_accuracy, sizeof final_accuracy, "final test accuracy %.2f%%",
                100 * accuracy);
  EXPECT_NE(evaluator_log.find(final_accuracy), std::string::npos) << final_accuracy << " not in:\n"
                                                                   << evaluator_log;
  // The namespace's LimitRange gave each container one core, and cifar-train sized its threads
  // to it (not to the node's cores, which the jobs side by side share).
  EXPECT_NE(evaluator_log.find("1 intra-op thread(s): the CPU limit of this process's cgroup is 1"),
            std::string::npos)
      << evaluator_log;
  EXPECT_EQ(status.value("restarts", 0), 0);
  // Every peer was reached by the DNS name in TF_CONFIG (the runtime knows no other address).
  const auto master = pod("ps-master-0");
  const auto tf_config =
      json::parse(master["spec"]["containers"][0]["env"][0]["value"].get<std::string>());
  EXPECT_EQ(tf_config["cluster"]["ps"][0], "ps-ps-0.ps." + ns_ + ".svc:2222");
  EXPECT_EQ(phase("ps-master-0"), "Succeeded");
}

TEST_F(Cluster, AnAllReduceJobWithTwoRanksRunsToSucceeded) {
  data_and_checkpoint_volumes();
  submit("ar", "  strategy: {type: AllReduce, allReduce: {backend: gloo}}\n",
         "    Worker: {replicas: 2}\n");
  ASSERT_TRUE(wait_for_state("ar", "Succeeded", seconds(300))) << state("ar");
  EXPECT_EQ(phase("ar-worker-0"), "Succeeded");
  // Rank 0 trained in a world of two: every step's all-reduce needed rank 1. (Rank 1 may still be
  // finishing when the chief's success ends the job: cleanPodPolicy Running deletes it then.)
  const auto log = kubectl({"logs", "ar-worker-0", "-n", ns_}).output;
  EXPECT_NE(log.find("rank 0 of 2"), std::string::npos) << log;
  // The final figures are the chief's last, from its termination message: 100%, and the test
  // accuracy its log ends with.
  const auto progress = status_of("ar")["progress"];
  EXPECT_EQ(progress.value("progressPercentage", 0), 100) << progress.dump();
  ASSERT_TRUE(progress.contains("testAccuracy")) << progress.dump();
  char final_accuracy[32];
  std::snprintf(final_accuracy, sizeof final_accuracy, "test accuracy %.2f%%",
                100 * progress["testAccuracy"].get<double>());
  EXPECT_NE(log.rfind(final_accuracy), std::string::npos) << final_accuracy << " not in:\n" << log;
}

// Then the whole job suspended and resumed: though no checkpoint is due (once an epoch), the master
// saves the version it stopped after, and the resumed job starts there.
TEST_F(Cluster, AWorkerPodDeletedMidRunIsRecreatedAndASuspendLosesNoStep) {
  data_and_checkpoint_volumes();
  checkpoint_every_steps_ = 0;
  // Long enough for a worker's replacement and then a suspend before the end.
  submit("del", kPsAsync, kPsReplicas, "  runPolicy: {restartPolicy: OnFailure}\n", "cifar10",
         kLongEnoughToInterrupt, kAsyncPsLearningRate);
  ASSERT_TRUE(wait_until_training("del"));
  ASSERT_TRUE(wait_for([&] { return phase("del-worker-1") == "Running"; }, seconds(120)));
  const auto first_uid = uid("del-worker-1");
  const auto deleted = kubectl({"delete", "pod", "del-worker-1", "-n", ns_, "--wait=false"});
  ASSERT_EQ(deleted.exit_code, 0) << deleted.output;
  ASSERT_EQ(phase("del-master-0"), "Running");  // mid-run: the chief is still training
  EXPECT_TRUE(wait_for(
      [&] { return replaced("del-worker-1", first_uid) && phase("del-worker-1") == "Running"; },
      seconds(120)));

  const auto [interrupt, resume] = suspension("del");
  interrupt_and_finish("del", "del-master-0",
                       "suspend of an async PS job (1 PS, master, 2 workers)", interrupt, resume,
                       Then::kStopAtTheResume);
}

TEST_F(Cluster, UnderExitCodeAKilledProcessIsRestartedAndAPermanentCodeFailsTheJob) {
  data_and_checkpoint_volumes();
  submit("code", kPsAsync, kPsReplicas, "  runPolicy: {restartPolicy: ExitCode, backoffLimit: 2}\n",
         "cifar10", kLongEnoughToInterrupt);
  ASSERT_TRUE(wait_until_training("code"));
  ASSERT_TRUE(wait_for([&] { return phase("code-worker-0") == "Running"; }, seconds(120)));
  int pid = 0;
  ASSERT_TRUE(wait_for([&] { return (pid = container_pid("code-worker-0")) > 0; }, seconds(30)));
  const auto killed_uid = uid("code-worker-0");
  ASSERT_EQ(::kill(pid, SIGKILL), 0);  // exit code 137: retryable
  ASSERT_EQ(phase("code-master-0"), "Running");
  EXPECT_TRUE(wait_for([&] { return status_of("code").value("restarts", 0) == 1; }, seconds(60)));
  // Its replacement (a pod of its own: ExitCode pods are recreated) trains, and the job with it.
  // The rest of the run asks nothing of this case: the job is deleted, not run to its end.
  std::string replacement_log;
  EXPECT_TRUE(wait_for_replacement_log(
      "code-worker-0", killed_uid,
      [](const std::string& log) { return log.find("  loss ") != std::string::npos; },  // progress
      replacement_log, seconds(180)))
      << replacement_log << diagnose("code");
  EXPECT_EQ(state("code"), "Running") << diagnose("code");
  EXPECT_EQ(kubectl({"delete", "ctj", "code", "-n", ns_, "--wait=false"}).exit_code, 0);

  // A permanent code: CIFAR-100 asked of a CIFAR-10 volume, the runtime exits 1 (no such file).
  submit("bad", kPsAsync, "    PS: {replicas: 1}\n    Master: {replicas: 1}\n",
         "  runPolicy: {restartPolicy: ExitCode}\n", "cifar100");
  ASSERT_TRUE(wait_for_state("bad", "Failed", seconds(180))) << state("bad");
  const auto condition = status_of("bad")["conditions"].back();
  EXPECT_EQ(condition["reason"], "PodFailed");
  EXPECT_NE(condition["message"].get<std::string>().find("exit code"), std::string::npos)
      << condition.dump();
}

// The token is the second factor behind the NetworkPolicy (network_policy_test.cpp): a pod that
// is the job's own worker in everything but the token, its job label included (so the policy lets
// it in), is refused by the PS, and the job goes on.
TEST_F(Cluster, APodWithoutTheJobsTokenIsRefusedByItsParameterServer) {
  data_and_checkpoint_volumes();
  submit("tok", kPsAsync, kPsReplicas, "", "cifar10", kLongEnoughToInterrupt, kAsyncPsLearningRate);
  ASSERT_TRUE(wait_until_training("tok"));
  ASSERT_TRUE(wait_for([&] { return phase("tok-worker-0") == "Running"; }, seconds(120)));
  auto intruder = pod("tok-worker-0");
  json copy = {{"apiVersion", "v1"},
               {"kind", "Pod"},
               {"metadata",
                {{"name", "intruder"},
                 {"labels", {{contract::label::kJobName, "tok"}, {"app", "intruder"}}}}},
               {"spec", intruder["spec"]}};
  auto& spec = copy["spec"];
  for (const auto* field : {"nodeName", "hostname", "subdomain", "priority"}) spec.erase(field);
  spec["restartPolicy"] = "Never";
  auto& container = spec["containers"][0];
  json env = json::array();
  for (const auto& e : container["env"]) {
    if (e["name"] != "CIFAR_PS_TOKEN") env.push_back(e);
  }
  container["env"] = env;
  // the service account token volume is the API server's to add again
  json volumes = json::array();
  for (const auto& v : spec["volumes"]) {
    if (!v.contains("projected")) volumes.push_back(v);
  }
  spec["volumes"] = volumes;
  json mounts = json::array();
  for (const auto& m : container["volumeMounts"]) {
    if (m["mountPath"] != "/var/run/secrets/kubernetes.io/serviceaccount") mounts.push_back(m);
  }
  container["volumeMounts"] = mounts;
  client_.create(cifar::kube::pods(ns_), copy);
  ASSERT_TRUE(wait_for([&] { return phase("intruder") == "Failed"; }, seconds(120)))
      << phase("intruder");
  const auto log = kubectl({"logs", "intruder", "-n", ns_}).output;
  EXPECT_NE(log.find("missing or wrong job token"), std::string::npos) << log;
  // And the job goes on, its own pods served by the PS: the chief's step passes the one it had
  // reached when the intruder was refused (the rest of the run asks nothing of this case).
  const auto step = [&] {
    return status_of("tok").value("progress", json::object()).value("step", 0);
  };
  const int step_at_refusal = step();
  EXPECT_TRUE(wait_for([&] { return step() > step_at_refusal || state("tok") == "Succeeded"; },
                       seconds(120)))
      << diagnose("tok");
  EXPECT_NE(state("tok"), "Failed") << diagnose("tok");
  EXPECT_EQ(status_of("tok").value("restarts", -1), 0) << diagnose("tok");
}

TEST_F(Cluster, DeletingAJobRemovesItsPodsServiceSecretAndPolicy) {
  data_and_checkpoint_volumes();
  submit("gc", kPsAsync, kPsReplicas);
  ASSERT_TRUE(wait_for([&] { return pods_of("gc").size() == 5U; }, seconds(60)));
  ASSERT_EQ(
      kubectl({"get", "service/gc", "secret/gc-token", "networkpolicy/gc", "-n", ns_}).exit_code,
      0);
  const auto deleted = kubectl({"delete", "ctj", "gc", "-n", ns_, "--wait=true"});
  ASSERT_EQ(deleted.exit_code, 0) << deleted.output;
  jobs_.clear();
  // The garbage collector (kube-controller-manager) follows the ownerReferences.
  EXPECT_TRUE(wait_for(
      [&] {
        return pods_of("gc").empty() && kubectl({"get", "service/gc", "-n", ns_}).exit_code != 0 &&
               kubectl({"get", "secret/gc-token", "-n", ns_}).exit_code != 0 &&
               kubectl({"get", "networkpolicy/gc", "-n", ns_}).exit_code != 0;
      },
      seconds(120)))
      << kubectl({"get", "all,secrets,networkpolicies", "-n", ns_}).output;
}

}  // namespace
}  // namespace cifar::e2e
