// Checkpoints in object storage on the cluster: a real S3-compatible server (SeaweedFS,
// deploy/object-store) on node 1's bridge, which every pod reaches over https with a private CA
// (checkpoint.s3.caBundleConfigMap), and jobs with checkpoint.uri and no checkpoint volume at all.
// A parameter-server job (with its evaluator) and an all-reduce job lose their chief mid-run and
// resume from the bucket; a job in another namespace continues the first one's run by resumeFrom:
// s3://... (a run moved between clusters, within one); keys that the store refuses fail a job at
// once with CheckpointStoreUnavailable, and no key appears in the job's status, Events or logs. A
// store that restarts mid-run is waited for (the job says so, and goes on); one away for longer
// than the job allows fails it saying so. Jobs in a namespace that denies all traffic by default
// reach their peers, DNS and the store through their own NetworkPolicy.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "storage/store.h"
#include "tests/e2e/object_storage_fixture.h"
#include "tests/support/object_store.h"

namespace cifar::e2e {
namespace {

TEST_F(ObjectStorage, JobsResumeFromTheBucketAndARunContinuesInAnotherNamespace) {
  host_volume("cifar10", e2e_dir() / "cifar10-slice", true);  // the data; no checkpoint volume
  checkpoint_every_steps_ = 4;
  submit("s3ps", kPsSync, kPsReplicas, "", "cifar10", kLongEnoughToHalt);
  submit("s3ar", kAllReduce, "    Worker: {replicas: 2}\n", "", "cifar10", kLongEnoughToHalt);
  // The parameter server restores its shard from the bucket. All-reduce rank 0's replacement
  // takes the state rank 1 holds in memory (the two stopped after the same step): a run that no
  // rank holds, read from the bucket, is this test's second half.
  delete_mid_run("s3ps", "s3ps-ps-0");
  delete_mid_run("s3ar", "s3ar-worker-0");
  expect_restored("s3ps", "s3ps-ps-0", "stripe(s) from");
  std::string rank0_log;
  EXPECT_TRUE(wait_for(
      [&] {
        rank0_log = kubectl({"logs", "s3ar-worker-0", "-n", ns_}).output;
        return rank0_log.find("from rank 1's memory (no checkpoint read)") != std::string::npos;
      },
      seconds(180)))
      << rank0_log << diagnose("s3ar");
  EXPECT_TRUE(wait_for_state("s3ps", "Succeeded", seconds(600))) << diagnose("s3ps");
  EXPECT_TRUE(wait_for_state("s3ar", "Succeeded", seconds(600))) << diagnose("s3ar");
  const auto ps_run = status_of("s3ps").value("modelDir", "");
  EXPECT_EQ(ps_run.rfind("s3://checkpoints/e2e/" + ns_ + "/s3ps-", 0), 0U) << ps_run;
  EXPECT_GT(status_of("s3ps")["progress"].value("testAccuracy", 0.0), 0) << diagnose("s3ps");
  EXPECT_EQ(kubectl({"get", "pvc", "-n", ns_, "-o", "name"}).output,
            "persistentvolumeclaim/cifar10\n");  // no checkpoint volume was made or needed

  // Another namespace (another cluster, for all the run knows) continues the all-reduce run from
  // the bucket for one more epoch.
  const auto run = status_of("s3ar").value("modelDir", "");
  const int final_step = status_of("s3ar")["progress"].value("step", 0);
  ASSERT_GT(final_step, 0);
  const auto other =
      cifar::testing::create_test_namespace(client_, "e2e-moved", cifar::testing::kRestricted);
  keys_secret(other, "store-keys", secret_);
  ca_config_map(other);
  host_volume("cifar10", e2e_dir() / "cifar10-slice", true, other);
  const auto manifest = volumes_ / "moved.yaml";
  std::ofstream(manifest) << "apiVersion: cifartrain.io/v1alpha1\nkind: CifarTrainJob\n"
                             "metadata: {name: moved}\nspec:\n  image: " +
                                 image_ +
                                 "\n  model: {name: simplecnn}\n"
                                 "  dataset: {name: cifar10, volume: {claimName: cifar10}}\n"
                                 "  training: {epochs: " +
                                 std::to_string(kLongEnoughToHalt + 1) +
                                 ", batchSize: 32}\n  checkpoint: {" +
                                 store_fields("s3://checkpoints/e2e", "store-keys") +
                                 ", resumeFrom: '" + run + "'}\n" + kAllReduce +
                                 "  replicaSpecs:\n    Worker: {replicas: 2}\n";
  ASSERT_EQ(kubectl({"apply", "-n", other, "-f", manifest.string()}).exit_code, 0);
  const auto moved_state = [&] {
    return kubectl({"get", "ctj", "moved", "-n", other, "-o", "jsonpath={.status.state}"}).output;
  };
  std::string rank0;
  EXPECT_TRUE(wait_for(
      [&] {
        rank0 = kubectl({"logs", "moved-worker-0", "-n", other}).output;
        return rank0.find("step time:") != std::string::npos;  // its summary, at its end
      },
      seconds(300)))
      << rank0;
  EXPECT_NE(rank0.find("resumed at step " + std::to_string(final_step)), std::string::npos)
      << rank0;
  EXPECT_NE(rank0.find("newest checkpoint " + run + "/simplecnn-step-"), std::string::npos)
      << rank0;
  EXPECT_TRUE(wait_for([&] { return moved_state() == "Succeeded"; }, seconds(120)))
      << kubectl({"get", "ctj", "moved", "-n", other, "-o", "jsonpath={.status}"}).output;
  kubectl({"delete", "namespace", other, "--wait=false"});
}

// The store restarts mid-run (a failover: connections refused for 20 s): the PS job trains on with
// its newest checkpoint waiting, its status says since when the store has not answered (condition
// CheckpointStoreUnreachable, a Warning Event), and once the store is back the job ends Succeeded
// with no pod restarted and its final checkpoint in the bucket.
TEST_F(ObjectStorage, AStoreThatRestartsMidRunIsWaitedForAndSaidWithNoRestart) {
  host_volume("cifar10", e2e_dir() / "cifar10-slice", true);
  checkpoint_every_steps_ = 4;
  // Training still when the store comes back: 20 s after a checkpoint of the first steps.
  submit("s3blip", kPsSync, kPsReplicas, "", "cifar10", kLongEnoughToInterrupt + 2);
  const auto checkpoint = [&] {
    return status_of("s3blip")
        .value("progress", json::object())
        .value("checkpoint", json::object());
  };
  const auto condition = [&] {
    for (const auto& c : status_of("s3blip").value("conditions", json::array())) {
      if (c.value("type", "") == "CheckpointStoreUnreachable") return c;
    }
    return json::object();
  };
  // Once the chief trains and has saved a checkpoint past the first steps.
  ASSERT_TRUE(wait_for([&] { return checkpoint().value("savedStep", 0) >= 4; }, seconds(300)))
      << diagnose("s3blip");
  const auto store_script = [&](const char* script, std::vector<std::string> args) {
    args.insert(
        args.begin(),
        {(std::filesystem::path(CIFAR_SOURCE_DIR) / "deploy/object-store" / script).string(),
         store_dir_.string()});
    const auto done = run_process(args);
    ASSERT_EQ(done.exit_code, 0) << done.output;
  };
  store_script("stop.sh", {});
  const auto stopped = std::chrono::steady_clock::now();
  EXPECT_TRUE(wait_for([&] { return condition().value("status", "") == "True"; }, seconds(60)))
      << diagnose("s3blip");
  EXPECT_EQ(condition().value("reason", ""), "StoreNotAnswering") << condition().dump();
  EXPECT_NE(condition().value("message", "").find("the checkpoint store has not answered since "),
            std::string::npos)
      << condition().dump();
  EXPECT_TRUE(checkpoint().contains("storeUnreachableSince")) << checkpoint().dump();
  EXPECT_EQ(status_of("s3blip").value("reason", ""), "StoreNotAnswering");  // kubectl get ctj
  std::this_thread::sleep_until(stopped + seconds(20));
  // Where it was: the same port, keys and certificate (start.sh without --fresh).
  store_script("start.sh", {"--address", kNodeOneBridge, "--bucket", "checkpoints", "--tls"});

  ASSERT_TRUE(wait_for_state("s3blip", "Succeeded", seconds(600))) << diagnose("s3blip");
  const auto status = status_of("s3blip");
  EXPECT_EQ(status.value("restarts", -1), 0) << status.dump();
  EXPECT_EQ(condition().value("status", ""), "False") << condition().dump();
  EXPECT_EQ(condition().value("reason", ""), "StoreAnswers") << condition().dump();
  const auto events = kubectl({"get", "events", "-n", ns_, "--field-selector",
                               "reason=StoreNotAnswering", "-o", "name"})
                          .output;
  EXPECT_FALSE(events.empty()) << kubectl({"get", "events", "-n", ns_}).output;
  expect_last_checkpoint_in_bucket(status);
}

// An all-reduce job whose store stays away longer than its checkpoint.maxUnsavedSeconds (15 s):
// it fails CheckpointStoreUnavailable, its message naming the store, its last answer and the step
// last saved, with no restart (exit 5 is never retried); what was saved stays in the bucket.
TEST_F(ObjectStorage, AStoreAwayLongerThanTheBoundFailsAnAllReduceJobSayingWhereAndTheStepSaved) {
  host_volume("cifar10", e2e_dir() / "cifar10-slice", true);
  checkpoint_every_steps_ = 4;
  checkpoint_store_ += ", maxUnsavedSeconds: 15";
  submit("s3away", kAllReduce, "    Worker: {replicas: 2}\n", "", "cifar10",
         3 * kLongEnoughToInterrupt);
  const auto saved = [&] {
    return status_of("s3away")
        .value("progress", json::object())
        .value("checkpoint", json::object())
        .value("savedStep", -1);
  };
  ASSERT_TRUE(wait_for([&] { return saved() >= 4; }, seconds(300))) << diagnose("s3away");
  const auto saved_before = saved();
  const auto stopped = run_process(
      {(std::filesystem::path(CIFAR_SOURCE_DIR) / "deploy/object-store/stop.sh").string(),
       store_dir_.string()});
  ASSERT_EQ(stopped.exit_code, 0) << stopped.output;
  ASSERT_TRUE(wait_for_state("s3away", "Failed", seconds(180))) << diagnose("s3away");
  const auto status = status_of("s3away");
  EXPECT_EQ(status.value("reason", ""), "CheckpointStoreUnavailable") << status.dump();
  const auto message = status.value("message", "");
  EXPECT_NE(message.find("longer than the job allows (checkpoint.maxUnsavedSeconds, "
                         "--max-unsaved-seconds 15); last error: "),
            std::string::npos)
      << message;
  EXPECT_NE(message.find(endpoint_), std::string::npos) << message;
  EXPECT_NE(message.find("the newest checkpoint saved is step "), std::string::npos) << message;
  EXPECT_EQ(status.value("restarts", -1), 0) << status.dump();
  // What was saved stays: the store back where it was, the run's checkpoints are there.
  const auto started = run_process(
      {(std::filesystem::path(CIFAR_SOURCE_DIR) / "deploy/object-store/start.sh").string(),
       store_dir_.string(), "--address", kNodeOneBridge, "--bucket", "checkpoints", "--tls"});
  ASSERT_EQ(started.exit_code, 0) << started.output;
  const auto run = status.value("modelDir", "");
  char name[64];
  std::snprintf(name, sizeof(name), "simplecnn-step-%010lld.pt",
                static_cast<long long>(saved_before));
  const auto names = open_run(status)->list("simplecnn-step-");
  EXPECT_FALSE(names.empty()) << run;
  EXPECT_GE(names.empty() ? std::string() : names.back(), std::string(name)) << run;
}

// An all-reduce job's store frozen for 60 s (SIGSTOP: connections accepted, nothing answered, as
// a store stuck in a pause): rank 0 trains on, the job says the store does not answer, and once the
// store answers again the job ends Succeeded with no restart, its last checkpoint in the bucket
// (a save that met the freeze at the end waits for it, within checkpoint.maxUnsavedSeconds). A
// save in the background is no stall: under a stall limit of 20 s, a third of the freeze, the
// job is never Stalled (the fixture counts the stall rule's alarms).
TEST_F(ObjectStorage, AStoreFrozenFor60sIsRiddenOutByAnAllReduceJobWithNoRestart) {
  host_volume("cifar10", e2e_dir() / "cifar10-slice", true);
  checkpoint_every_steps_ = 4;
  submit("s3frozen", kAllReduce, "    Worker: {replicas: 2}\n",
         "  runPolicy: {stallTimeoutSeconds: 20}\n", "cifar10", kLongEnoughToInterrupt + 2);
  const auto checkpoint = [&] {
    return status_of("s3frozen")
        .value("progress", json::object())
        .value("checkpoint", json::object());
  };
  ASSERT_TRUE(wait_for([&] { return checkpoint().value("savedStep", 0) >= 4; }, seconds(300)))
      << diagnose("s3frozen");
  pid_t weed = 0;
  std::ifstream(store_dir_ / "pid") >> weed;  // deploy/object-store/start.sh's server
  ASSERT_GT(weed, 0);
  ASSERT_EQ(::kill(weed, SIGSTOP), 0);
  const auto frozen = std::chrono::steady_clock::now();
  EXPECT_TRUE(wait_for([&] { return checkpoint().contains("storeUnreachableSince"); }, seconds(55)))
      << diagnose("s3frozen");
  std::this_thread::sleep_until(frozen + seconds(60));
  ASSERT_EQ(::kill(weed, SIGCONT), 0);

  ASSERT_TRUE(wait_for_state("s3frozen", "Succeeded", seconds(600))) << diagnose("s3frozen");
  const auto status = status_of("s3frozen");
  EXPECT_EQ(status.value("restarts", -1), 0) << status.dump();
  expect_last_checkpoint_in_bucket(status);
}

// A namespace whose default NetworkPolicy denies all ingress and egress, as hardened clusters
// have: a PS job (its peers found by DNS, its checkpoints and its evaluator's reads in the store)
// and an all-reduce job (the c10d store, Gloo's pairs, rank 0's checkpoints) run to Succeeded with
// no restart, because each job's own policy lets its pods reach each other, DNS and the store. The
// deny is enforced: a pod of no job there does not even reach the metrics port, which the job's
// policy opens to anyone (its egress is denied). Here CoreDNS and the store listen on the nodes'
// gateway, which the policy agent does not filter, so what the DNS and store rules allow is shown
// by the pods' own traffic only where it crosses pods; tests/operator checks the rules themselves.
TEST_F(ObjectStorage, InANamespaceThatDeniesAllTrafficJobsReachTheirPeersDnsAndTheStore) {
  apply(
      "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: deny-all}\n"
      "spec:\n  podSelector: {}\n  policyTypes: [Ingress, Egress]\n",
      ns_);
  host_volume("cifar10", e2e_dir() / "cifar10-slice", true);
  submit("hardps", kPsAsync, kPsReplicas, "", "cifar10", 4, kAsyncPsLearningRate);
  submit("hardar", kAllReduce, "    Worker: {replicas: 2}\n", "", "cifar10", 2);  // no fault
  ASSERT_TRUE(wait_until_training("hardps")) << diagnose("hardps");
  const auto node = placement("hardps").begin()->second;
  idle_pod("outsider", ns_, node, "{app: outsider}");
  const int outsider = pid_in(ns_, "outsider");
  ASSERT_GT(outsider, 0);
  const auto master_ip = pod("hardps-master-0")["status"].value("podIP", "");
  ASSERT_FALSE(master_ip.empty());
  EXPECT_STREQ(name_of(reach(outsider, master_ip, 9464)), name_of(Reach::kTimedOut));
  EXPECT_TRUE(wait_for_state("hardps", "Succeeded", seconds(600))) << diagnose("hardps");
  EXPECT_TRUE(wait_for_state("hardar", "Succeeded", seconds(600))) << diagnose("hardar");
  EXPECT_EQ(status_of("hardps").value("restarts", -1), 0) << diagnose("hardps");
  EXPECT_EQ(status_of("hardar").value("restarts", -1), 0) << diagnose("hardar");
}

TEST_F(ObjectStorage, KeysTheStoreRefusesFailTheJobAtOnceAndAreNeverShown) {
  host_volume("cifar10", e2e_dir() / "cifar10-slice", true);
  const std::string wrong = "not-the-store-secret-0123456789";
  keys_secret(ns_, "wrong-keys", wrong);
  checkpoint_store_ = store_fields("s3://checkpoints/e2e", "wrong-keys");
  submit("refused", kPsSync, "    PS: {replicas: 1}\n    Master: {replicas: 1}\n");
  ASSERT_TRUE(wait_for_state("refused", "Failed", seconds(180))) << diagnose("refused");
  const auto status = status_of("refused");
  EXPECT_EQ(status.value("reason", ""), "CheckpointStoreUnavailable") << status.dump();
  const auto message = status.value("message", "");
  EXPECT_NE(message.find("SignatureDoesNotMatch"), std::string::npos) << message;
  EXPECT_NE(message.find(endpoint_), std::string::npos) << message;
  EXPECT_EQ(status.value("restarts", 0), 0) << status.dump();
  // The keys appear in neither the status nor the Events, which carry the failure's message. (The
  // pods, and with them their logs, are deleted as the job fails; that cifar-train's own output
  // never holds the secret is TrainingInObjectStorage.AStoreThatRefusesEndsTheRunAtOnceSayingWhy.)
  const std::string shown =
      status.dump() + kubectl({"get", "events", "-n", ns_, "-o", "yaml"}).output;
  EXPECT_NE(shown.find("SignatureDoesNotMatch"), std::string::npos)
      << shown;  // the message is there
  EXPECT_EQ(shown.find(wrong), std::string::npos);
  EXPECT_EQ(shown.find(secret_), std::string::npos);
}

// Data and checkpoints in the bucket, no volume at all: the PS job's every pod that reads data
// fetches the slice into its own emptyDir; a worker deleted mid-run comes back with a new one and
// fetches it again; the job ends Succeeded and its namespace has no PersistentVolumeClaim.
TEST_F(ObjectStorage, AJobWithNoVolumeReadsItsDataFromTheBucketAndAReplacedPodFetchesItAgain) {
  put_slice("data/cifar10");
  dataset_source_ = "uri: s3://checkpoints/data/cifar10";
  submit("novol", kPsSync, kPsReplicas, "", "cifar10", kLongEnoughToHalt);
  ASSERT_TRUE(wait_until_training("novol")) << diagnose("novol");
  const std::string fetched = "dataset s3://checkpoints/data/cifar10: 6 file(s) fetched";
  EXPECT_NE(kubectl({"logs", "novol-master-0", "-n", ns_}).output.find(fetched), std::string::npos)
      << diagnose("novol");
  const auto first_uid = pod("novol-worker-1")["metadata"].value("uid", "");
  delete_mid_run("novol", "novol-worker-1");
  std::string log;
  EXPECT_TRUE(wait_for(
      [&] {
        try {
          if (pod("novol-worker-1")["metadata"].value("uid", "") == first_uid) return false;
        } catch (const cifar::kube::ApiError&) {
          return false;  // not made again yet
        }
        log = kubectl({"logs", "novol-worker-1", "-n", ns_}).output;
        return log.find(fetched) != std::string::npos;
      },
      seconds(180)))
      << log << diagnose("novol");
  EXPECT_TRUE(wait_for_state("novol", "Succeeded", seconds(600))) << diagnose("novol");
  EXPECT_EQ(kubectl({"get", "pvc", "-n", ns_, "-o", "name"}).output, "");
  EXPECT_GT(status_of("novol")["progress"].value("testAccuracy", 0.0), 0) << diagnose("novol");
}

// A dataset that cannot be read fails its job at once, naming the object, with no restart: a file
// cut short in the bucket, and a prefix with nothing under it.
TEST_F(ObjectStorage, ADatasetThatCannotBeReadFailsTheJobAtOnceNamingTheObject) {
  put_slice("short/cifar10", "data_batch_3.bin", 100);
  dataset_source_ = "uri: s3://checkpoints/short/cifar10";
  submit("cutdata", kAllReduce, "    Worker: {replicas: 1}\n");
  dataset_source_ = "uri: s3://checkpoints/nothing/here";
  submit("nodata", kAllReduce, "    Worker: {replicas: 1}\n");
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"cutdata",
       "dataset object s3://checkpoints/short/cifar10/cifar-10-batches-bin/data_batch_3.bin has "
       "921800 bytes, not a whole number of 3073-byte records"},
      {"nodata", "dataset s3://checkpoints/nothing/here: no object data_batch_1.bin"}};
  for (const auto& [job, said] : expected) {
    ASSERT_TRUE(wait_for_state(job, "Failed", seconds(240))) << diagnose(job);
    const auto status = status_of(job);
    EXPECT_EQ(status.value("reason", ""), "DatasetUnavailable") << status.dump();
    EXPECT_NE(status.value("message", "").find(said), std::string::npos) << status.dump();
    EXPECT_EQ(status.value("restarts", -1), 0) << status.dump();
  }
}

}  // namespace
}  // namespace cifar::e2e
