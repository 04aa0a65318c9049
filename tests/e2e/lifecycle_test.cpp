// What a job that goes wrong does on the local cluster (reconcile.h's lifecycle rules):
// pods that can never start are reported and fail the job at its startup deadline (a synchronous
// job whose worker never starts takes no step meanwhile), a create refused by a quota waits with
// a reason until the quota allows it (an asynchronous job trains meanwhile and says with how many
// trainers), a pod stuck terminating is reported and bounded, a stop cut short by its grace period
// is reported, a trainer gone for good mid-run is reported as dropped. Each says why in the job's
// status (reason, message, `kubectl get ctj`) and a Warning Event. A failing test prints the job's
// status, Events and pods' logs.
#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <regex>
#include <string>
#include <thread>

#include "tests/e2e/cluster_fixture.h"

namespace cifar::e2e {
namespace {

std::string reason_of(const json& status) { return status.value("reason", ""); }
std::string message_of(const json& status) { return status.value("message", ""); }

class WhenAJobGoesWrong : public Cluster {
 protected:
  // The Events of `job` with `reason`, as `kubectl get events` lists them.
  std::string events(const std::string& job, const std::string& reason) {
    return kubectl({"get", "events", "-n", ns_, "--field-selector",
                    "involvedObject.name=" + job + ",reason=" + reason, "--no-headers"})
        .output;
  }
  // Whether a Warning Event of `reason` on `job` appears within 15 s: the operator records Events
  // beside its status writes, not before them (a CI run read a Failed status a moment before
  // its StartupDeadlineExceeded Event was there).
  bool warned(const std::string& job, const std::string& reason) {
    return wait_for([&] { return events(job, reason).find("Warning") != std::string::npos; },
                    seconds(15));
  }

  void TearDown() override {
    unlabel_node();
    Cluster::TearDown();
  }

  // Puts a label of this case's own on `node` ("<label>=worker"; gone at the end): returns it.
  std::string label_node(const std::string& node) {
    labelled_node_ = node;
    node_label_ = "e2e.cifartrain.io/" + ns_;
    if (kubectl({"label", "node", node, node_label_ + "=worker"}).exit_code != 0) {
      ADD_FAILURE() << "could not label node " << node;
    }
    return node_label_;
  }
  bool unlabel_node() {
    if (labelled_node_.empty()) return true;
    const bool done = kubectl({"label", "node", labelled_node_, node_label_ + "-"}).exit_code == 0;
    labelled_node_.clear();
    return done;
  }

  // The job's condition of `type` ({} if it has none).
  json condition(const std::string& job, const std::string& type) {
    for (const auto& c : status_of(job).value("conditions", json::array())) {
      if (c.value("type", "") == type) return c;
    }
    return json::object();
  }

  std::string labelled_node_;
  std::string node_label_;
};

TEST_F(WhenAJobGoesWrong, PodsThatCanNeverStartAreReportedAndFailTheJobAtItsStartupDeadline) {
  data_and_checkpoint_volumes();
  const std::string deadline = "  runPolicy: {startupDeadlineSeconds: 45}\n";
  // More CPU than the node has: the scheduler cannot place it.
  submit("big", kAllReduce,
         "    Worker:\n      replicas: 1\n      resources: {requests: {cpu: \"64\"}, limits: {cpu: "
         "\"64\"}}\n",
         deadline);
  // A synchronous PS job whose worker cannot be placed: its PS and master run, but a sync job
  // trains with every trainer it names, so the master waits (past the PS's 30 s timeout, after
  // which the absent worker used to be dropped and the master trained alone on half the data).
  submit("half", kPsSync,
         "    PS: {replicas: 1}\n    Master: {replicas: 1}\n"
         "    Worker:\n      replicas: 1\n      resources: {requests: {cpu: \"64\"}, limits: {cpu: "
         "\"64\"}}\n",
         "  runPolicy: {startupDeadlineSeconds: 75}\n");
  // An image no registry serves: the kubelet cannot pull it.
  image_ = "localhost/cifartrain/no-such-image:dev";
  submit("pull", kAllReduce, "    Worker: {replicas: 1}\n", deadline);

  // The scheduler's latest word, which the status follows: its first attempt can meet the data's
  // claim not yet bound (CI saw "pod has unbound immediate PersistentVolumeClaims" first).
  ASSERT_TRUE(wait_for(
      [&] {
        const auto status = status_of("big");
        return reason_of(status) == "Unschedulable" &&
               message_of(status).find("Insufficient cpu") != std::string::npos;
      },
      seconds(40)))
      << status_of("big").dump();
  ASSERT_TRUE(wait_for(
      [&] {
        const auto reason = reason_of(status_of("pull"));
        return reason == "ErrImagePull" || reason == "ImagePullBackOff";
      },
      seconds(40)))
      << status_of("pull").dump();
  EXPECT_NE(message_of(status_of("pull")).find("pull-worker-0"), std::string::npos);
  // What a user sees: the reason in `kubectl get ctj`, the message with -o wide, an Event.
  const auto table = kubectl({"get", "ctj", "-n", ns_, "-o", "wide"}).output;
  EXPECT_NE(table.find("Unschedulable"), std::string::npos) << table;
  EXPECT_NE(table.find("Insufficient cpu"), std::string::npos) << table;
  EXPECT_NE(table.find("ImagePull"), std::string::npos) << table;
  EXPECT_TRUE(warned("big", "Unschedulable"));

  ASSERT_TRUE(wait_for_state("big", "Failed", seconds(90))) << status_of("big").dump();
  ASSERT_TRUE(wait_for_state("pull", "Failed", seconds(90))) << status_of("pull").dump();
  for (const auto* job : {"big", "pull"}) {
    const auto status = status_of(job);
    EXPECT_EQ(reason_of(status), "StartupDeadlineExceeded") << status.dump();
    EXPECT_NE(message_of(status).find(std::string(job) + "-worker-0 did not start within 45 s"),
              std::string::npos)
        << status.dump();
    EXPECT_TRUE(warned(job, "StartupDeadlineExceeded"));
  }

  // The master's whole log, to its end (the job's failure deletes the pod).
  const auto master_log = volumes_ / "half-master-0.log";
  ASSERT_TRUE(wait_for(
      [&] {
        return kubectl({"logs", "half-master-0", "-n", ns_}).exit_code == 0;
      },
      seconds(60)))
      << diagnose("half");
  auto follower = follow_log("half-master-0", master_log);
  ASSERT_TRUE(wait_for_state("half", "Failed", seconds(120))) << diagnose("half");
  EXPECT_EQ(reason_of(status_of("half")), "StartupDeadlineExceeded") << status_of("half").dump();
  EXPECT_NE(message_of(status_of("half")).find("half-worker-0 did not start within 75 s"),
            std::string::npos)
      << status_of("half").dump();
  EXPECT_TRUE(wait_for([&] { return !follower->running(); }, seconds(60)));
  std::ifstream in(master_log);
  const std::string said((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(said.find("waiting for trainer 1 to join"), std::string::npos) << said;
  EXPECT_FALSE(std::regex_search(said, std::regex(R"(epoch \d+/\d+ step \d+)"))) << said;
  EXPECT_EQ(status_of("half").value("progress", json::object()).value("step", 0), 0)
      << status_of("half").dump();
  EXPECT_NE(message_of(status_of("big")).find("Insufficient cpu"), std::string::npos);
  EXPECT_NE(message_of(status_of("pull")).find("ImagePull"), std::string::npos);
  // cleanPodPolicy Running: the pending pods are deleted; the jobs hold nothing.
  EXPECT_TRUE(wait_for(
      [&] { return pods_of("big").empty() && pods_of("pull").empty() && pods_of("half").empty(); },
      seconds(60)));
}

TEST_F(WhenAJobGoesWrong, ACreateRefusedByAQuotaWaitsWithAReasonAndTheJobRunsOnceTheQuotaAllows) {
  data_and_checkpoint_volumes();
  apply(
      "apiVersion: v1\nkind: ResourceQuota\nmetadata: {name: pods}\nspec:\n  hard: {pods: "
      "\"2\"}\n");
  // Admission counts against the quota once the controller has written its usage.
  ASSERT_TRUE(wait_for(
      [&] {
        return kubectl({"get", "resourcequota", "pods", "-n", ns_, "-o",
                        "jsonpath={.status.hard.pods}"})
                   .output == "2";
      },
      seconds(30)));
  submit("quota", kPsAsync,
         "    PS: {replicas: 1}\n    Master: {replicas: 1}\n    Worker: {replicas: 1}\n", "",
         "cifar10", 6);
  ASSERT_TRUE(
      wait_for([&] { return reason_of(status_of("quota")) == "FailedCreate"; }, seconds(60)))
      << status_of("quota").dump();
  EXPECT_NE(message_of(status_of("quota")).find("exceeded quota"), std::string::npos)
      << status_of("quota").dump();
  EXPECT_TRUE(warned("quota", "FailedCreate"));
  EXPECT_EQ(pods_of("quota").size(), 2U);  // what the quota allows; the rest is retried
  EXPECT_NE(state("quota"), "Failed");
  // An asynchronous job starts with the trainers that are there, and says so.
  ASSERT_TRUE(
      wait_for([&] { return condition("quota", "TrainersMissing").value("status", "") == "True"; },
               seconds(120)))
      << status_of("quota").dump();
  EXPECT_EQ(condition("quota", "TrainersMissing")["reason"], "TrainerNotJoined");
  EXPECT_EQ(condition("quota", "TrainersMissing")["message"],
            "quota-worker-0 has not joined; training on with 1 of 2 trainers");
  EXPECT_TRUE(warned("quota", "TrainerNotJoined"));

  const auto raised = kubectl({"patch", "resourcequota", "pods", "-n", ns_, "--type=merge", "-p",
                               R"({"spec":{"hard":{"pods":"10"}}})"});
  ASSERT_EQ(raised.exit_code, 0) << raised.output;
  EXPECT_TRUE(wait_for(
      [&] {
        const auto p = phase("quota-worker-0");
        return p == "Running" || p == "Succeeded";
      },
      seconds(90)))
      << status_of("quota").dump();
  ASSERT_TRUE(wait_for_state("quota", "Succeeded", seconds(300))) << state("quota");
  EXPECT_EQ(reason_of(status_of("quota")), "JobSucceeded");
  // The worker joined: said while the job ran, and the end is a whole job's.
  EXPECT_EQ(condition("quota", "TrainersMissing")["reason"], "AllTrainersTraining")
      << status_of("quota").dump();
  EXPECT_EQ(message_of(status_of("quota")), "the chief quota-master-0 succeeded");
}

// A trainer gone for good mid-run: the worker may run only on a node with a label of this
// case's own; once the job trains, the label goes and the worker's pod is deleted, so its
// replacement can never be placed (as if its node were gone, without taking the other cases'
// pods with it). The PS drops the silent worker after its timeout (30 s) and the master trains
// on: the job says so while it runs and when it ends. Long enough that the master, alone after
// the drop, trains for several of the operator's 5 s progress scrapes (with 4 epochs a cold CI
// run saw the job end 6 s after the drop, before a scrape had seen it).
TEST_F(WhenAJobGoesWrong, AWorkerGoneForGoodMidRunIsReportedAsDroppedAndTheJobsEndSaysSo) {
  data_and_checkpoint_volumes();
  const auto node = kubectl({"get", "nodes", "-o", "jsonpath={.items[0].metadata.name}"}).output;
  ASSERT_FALSE(node.empty());
  const auto label = label_node(node);
  submit("gone", kPsSync,
         "    PS: {replicas: 1}\n    Master: {replicas: 1}\n    Worker:\n      replicas: 1\n"
         "      template: {spec: {nodeSelector: {" +
             label + ": worker}}}\n",
         "", "cifar10", 3 * kLongEnoughToInterrupt);
  ASSERT_TRUE(wait_until_training("gone")) << diagnose("gone");
  ASSERT_TRUE(unlabel_node());
  ASSERT_EQ(kubectl({"delete", "pod", "gone-worker-0", "-n", ns_, "--wait=false"}).exit_code, 0);

  ASSERT_TRUE(
      wait_for([&] { return condition("gone", "TrainersMissing").value("status", "") == "True"; },
               seconds(120)))
      << diagnose("gone");
  const auto dropped = condition("gone", "TrainersMissing");
  EXPECT_EQ(dropped["reason"], "TrainerDropped");
  const std::regex said(R"(gone-worker-0 dropped at step \d+; training on with 1 of 2 trainers)");
  EXPECT_TRUE(std::regex_match(dropped["message"].get<std::string>(), said)) << dropped.dump();
  EXPECT_TRUE(warned("gone", "TrainerDropped"));
  EXPECT_EQ(phase("gone-worker-0"), "Pending");  // the replacement, which nothing can place

  ASSERT_TRUE(wait_for_state("gone", "Succeeded", seconds(300))) << diagnose("gone");
  EXPECT_TRUE(std::regex_search(
      message_of(status_of("gone")),
      std::regex(R"(^the chief gone-master-0 succeeded; it ended with 1 of 2 trainers: )"
                 R"(gone-worker-0 dropped at step \d+$)")))
      << status_of("gone").dump();
}

TEST_F(WhenAJobGoesWrong, APodStuckTerminatingIsReportedAndFailsTheJobAfterItsBound) {
  data_and_checkpoint_volumes();
  // A job that only has to be running while the bound runs out: a fifth of a core a pod (its
  // training's pace is not what this case is about, and at a core each its four pods took ~30
  // CPU-s of the suite's two cores).
  const std::string paced = ", resources: {limits: {cpu: 200m}}}\n";
  submit("stuck", kPsAsync,
         "    PS: {replicas: 1" + paced + "    Master: {replicas: 1" + paced +
             "    Worker: {replicas: 2" + paced,
         "  runPolicy: {terminatingDeadlineSeconds: 20}\n", "cifar10", 12);
  ASSERT_TRUE(wait_until_training("stuck"));
  // A finalizer nobody removes keeps the deleted pod Terminating, as a node that stopped
  // answering would. The test removes it in the end (or the namespace could never go).
  const auto hold = [&](const std::string& patch, const char* type) {
    return kubectl({"patch", "pod", "stuck-worker-1", "-n", ns_, "--type", type, "-p", patch});
  };
  struct Release {
    std::function<void()> release;
    ~Release() { release(); }
  } release{[&] {
    if (pod_exists("stuck-worker-1")) {
      hold(R"([{"op":"remove","path":"/metadata/finalizers"}])", "json");
    }
  }};
  ASSERT_EQ(hold(R"({"metadata":{"finalizers":["cifartrain.io/e2e-hold"]}})", "merge").exit_code,
            0);
  const auto deleted =
      kubectl({"delete", "pod", "stuck-worker-1", "-n", ns_, "--grace-period=1", "--wait=false"});
  ASSERT_EQ(deleted.exit_code, 0) << deleted.output;
  ASSERT_TRUE(
      wait_for([&] { return reason_of(status_of("stuck")) == "PodStuckTerminating"; }, seconds(60)))
      << status_of("stuck").dump();
  EXPECT_NE(message_of(status_of("stuck")).find("pod stuck-worker-1 is still terminating"),
            std::string::npos)
      << status_of("stuck").dump();
  EXPECT_EQ(state("stuck"), "Running");  // reported, not yet failed
  ASSERT_TRUE(wait_for_state("stuck", "Failed", seconds(90))) << status_of("stuck").dump();
  EXPECT_EQ(reason_of(status_of("stuck")), "PodStuckTerminating");
  EXPECT_NE(message_of(status_of("stuck")).find("terminatingDeadlineSeconds is 20"),
            std::string::npos);
  EXPECT_TRUE(warned("stuck", "PodStuckTerminating"));
}

// A rank's pod lost after the first checkpoint, and later the whole job suspended and resumed:
// each time the ranks start again, agree on the newest checkpoint and continue from it, so the job
// ends Succeeded having trained no epoch twice. Checkpoints are due once an epoch only, yet the
// suspend loses no step: the ranks stop at a step boundary and rank 0 saves it (graceful_stop.h).
TEST_F(WhenAJobGoesWrong, AnAllReduceJobContinuesFromItsCheckpointAfterALostRankAndASuspend) {
  data_and_checkpoint_volumes();
  checkpoint_every_steps_ = 0;
  // The rank is lost after the first checkpoint (epoch 1's) and the suspend follows as soon as
  // both train again, which leaves epochs to go.
  constexpr int kEpochs = kLongEnoughToInterrupt;
  submit("ar", kAllReduce, "    Worker: {replicas: 2}\n", "", "cifar10", kEpochs);
  ASSERT_TRUE(wait_until_training("ar"));
  const auto dir = run_dir("ar");
  ASSERT_TRUE(wait_for_checkpoint(dir)) << dir;
  const auto lost = kubectl({"delete", "pod", "ar-worker-1", "-n", ns_, "--wait=false"});
  ASSERT_EQ(lost.exit_code, 0) << lost.output;
  // Both ranks train again from the checkpoint (rank 0 waited for its peer's replacement inside
  // its process): rank 0, which steps with rank 1, has trained a step since it resumed. (The
  // job's progress is no sign: it still holds the step before the loss.)
  ASSERT_TRUE(wait_for(
      [&] {
        return kubectl({"logs", "ar-worker-1", "-n", ns_}).output.find("resumed at step") !=
                   std::string::npos &&
               trained_since("ar-worker-0", "resumed at step");
      },
      seconds(180)))
      << diagnose("ar");
  // The lost rank cost its own pod and nothing else: rank 0 never restarted, and the pod deleted
  // from outside is not charged (status.restarts, which the backoffLimit counts, says 0).
  EXPECT_EQ(restart_count("ar-worker-0"), 0) << diagnose("ar");
  EXPECT_EQ(status_of("ar").value("restarts", -1), 0) << diagnose("ar");
  const auto [interrupt, resume] = suspension("ar");
  const auto cost = interrupt_and_finish("ar", "ar-worker-0", "suspend of a 2-rank all-reduce job",
                                         interrupt, resume);
  EXPECT_LE(cost.resumed_from, cost.stopped_after);  // ranks that stop together saved that step
  // monitor.jsonl, which rank 0 appends an epoch at a time: every epoch once, in order.
  EXPECT_EQ(recorded_epochs(dir), every_epoch_once(kEpochs));
  // The pods deleted (one from outside, both by the suspend) went as they should: no Warning
  // called one stuck on its way out.
  EXPECT_EQ(events("ar", "PodStuckTerminating").find("Warning"), std::string::npos)
      << events("ar", "PodStuckTerminating");
}

// A grace period too short for the graceful stop to save ends in SIGKILL (here under 1 s, with a
// chief that cannot act on its SIGTERM: stopped with SIGSTOP, as a rank stuck in a long step or a
// slow write is). The operator says so in a Warning Event on the job, and the job goes on from its
// last checkpoint: the steps since are lost, which the Event tells the user how to avoid.
TEST_F(WhenAJobGoesWrong, AGracePeriodTooShortToSaveIsReportedAndTheJobGoesOnFromItsCheckpoint) {
  data_and_checkpoint_volumes();
  submit("short", kAllReduce,
         "    Worker:\n      replicas: 1\n"
         "      template: {spec: {terminationGracePeriodSeconds: 1}}\n",
         "", "cifar10", kLongEnoughToHalt);
  ASSERT_TRUE(wait_until_training("short"));
  const auto dir = run_dir("short");
  ASSERT_TRUE(wait_for_checkpoint(dir)) << dir;
  const int pid = container_pid("short-worker-0");
  ASSERT_GT(pid, 0);
  ASSERT_EQ(::kill(pid, SIGSTOP), 0);
  ASSERT_NE(state("short"), "Succeeded") << "the job ended before it could be interrupted";
  const auto newest = newest_checkpoint_step(dir);  // the chief saves nothing more
  const auto [interrupt, resume] = suspension("short");
  interrupt();
  ASSERT_TRUE(wait_for([&] { return !events("short", "StopNotSaved").empty(); }, seconds(30)))
      << diagnose("short");
  const auto said = events("short", "StopNotSaved");
  EXPECT_NE(said.find("Warning"), std::string::npos) << said;
  EXPECT_NE(said.find("short-worker-0 was killed when its grace period of 1 s ran out"),
            std::string::npos)
      << said;
  resume();
  ASSERT_TRUE(wait_for_state("short", "Succeeded", seconds(400))) << diagnose("short");
  const auto resumed =
      number_after(kubectl({"logs", "short-worker-0", "-n", ns_}).output, "resumed at step ", "");
  std::cerr << "interruption | suspend of a 1-rank all-reduce job, chief killed at the end of a "
               "1 s grace period | resumed from step "
            << resumed << " | its newest checkpoint step " << newest << "\n";
  EXPECT_EQ(resumed, static_cast<double>(newest));
}

// A job deleted and applied again under its name (a GitOps re-apply) is a new run: it trains
// from the start in a model dir of its own, instead of "succeeding" at once from the old run's
// checkpoints and done marker.
TEST_F(WhenAJobGoesWrong, AJobAppliedAgainUnderItsNameIsANewRun) {
  data_and_checkpoint_volumes();
  const std::string replicas = "    PS: {replicas: 1}\n    Master: {replicas: 1}\n";
  submit("again", kPsAsync, replicas);
  ASSERT_TRUE(wait_for_state("again", "Succeeded", seconds(240))) << state("again");
  const auto first = status_of("again");
  const auto first_dir = first.value("modelDir", "");
  EXPECT_NE(
      first_dir.find("/" + ns_ + "/again-" + job("again")["metadata"]["uid"].get<std::string>()),
      std::string::npos)
      << first.dump();
  const auto deleted = kubectl({"delete", "ctj", "again", "-n", ns_, "--wait=true"});
  ASSERT_EQ(deleted.exit_code, 0) << deleted.output;
  ASSERT_TRUE(wait_for([&] { return pods_of("again").empty(); }, seconds(60)));
  submit("again", kPsAsync, replicas);
  ASSERT_TRUE(wait_for_state("again", "Succeeded", seconds(240))) << state("again");
  const auto second = status_of("again");
  EXPECT_NE(second.value("modelDir", ""), first_dir);
  // The whole run again, from step 0: the same number of steps, none of them restored.
  EXPECT_EQ(second["progress"].value("step", -1), first["progress"].value("step", -2))
      << second.dump();
  const auto log = kubectl({"logs", "again-master-0", "-n", ns_}).output;
  EXPECT_EQ(log.find("resumed from"), std::string::npos) << log;
}

// A job deleted with --cascade=orphan leaves its pods, Service, Secret and NetworkPolicy behind
// (the garbage collector removes their owner references). A new job of the same name adopts none
// of it (the old master's success would end it at once, the old Secret would be its token): it
// waits, says why, and runs once they are gone.
TEST_F(WhenAJobGoesWrong, ObjectsLeftByAnEarlierJobOfTheSameNameAreNotAdopted) {
  data_and_checkpoint_volumes();
  const std::string replicas = "    PS: {replicas: 1}\n    Master: {replicas: 1}\n";
  const std::string keep_pods = "  runPolicy: {cleanPodPolicy: None}\n";
  submit("orphan", kPsAsync, replicas, keep_pods);
  ASSERT_TRUE(wait_for_state("orphan", "Succeeded", seconds(240))) << state("orphan");
  const auto old_master = pod("orphan-master-0")["metadata"]["uid"].get<std::string>();
  const auto orphaned = kubectl({"delete", "ctj", "orphan", "-n", ns_, "--cascade=orphan"});
  ASSERT_EQ(orphaned.exit_code, 0) << orphaned.output;
  ASSERT_TRUE(wait_for(
      [&] {
        for (const auto& p : pods_of("orphan")) {
          if (p["metadata"].contains("ownerReferences")) return false;
        }
        return kubectl({"get", "ctj", "orphan", "-n", ns_}).exit_code != 0;
      },
      seconds(60)));
  submit("orphan", kPsAsync, replicas, keep_pods);
  ASSERT_TRUE(wait_for([&] { return reason_of(status_of("orphan")) == "NotOwned"; }, seconds(60)))
      << status_of("orphan").dump();
  EXPECT_NE(message_of(status_of("orphan")).find("exists and is not managed by this job"),
            std::string::npos)
      << status_of("orphan").dump();
  EXPECT_TRUE(warned("orphan", "NotOwned"));
  EXPECT_NE(state("orphan"), "Succeeded");  // the old master's success is not this job's
  EXPECT_EQ(pod("orphan-master-0")["metadata"]["uid"], old_master);  // nothing touched
  // The user removes what the earlier job left (the Secret last: the job is held there first).
  const auto removed = kubectl({"delete", "-n", ns_, "pod/orphan-ps-0", "pod/orphan-master-0",
                                "service/orphan", "networkpolicy/orphan", "secret/orphan-token"});
  ASSERT_EQ(removed.exit_code, 0) << removed.output;
  ASSERT_TRUE(wait_for_state("orphan", "Succeeded", seconds(300))) << status_of("orphan").dump();
  EXPECT_NE(pod("orphan-master-0")["metadata"]["uid"], old_master);
  EXPECT_EQ(reason_of(status_of("orphan")), "JobSucceeded");
}

}  // namespace
}  // namespace cifar::e2e
