// A watch broken by an apiserver restart recovers: with a control plane of its own (the shared
// one must not go away under the other tests), the operator keeps working across a restart of
// kube-apiserver.
#include <gtest/gtest.h>

#include <set>

#include "kube/client.h"
#include "tests/integration/cifartrainjobs.h"
#include "tests/support/process.h"

namespace {

using cifar::testing::run_process;
using nlohmann::json;
using std::chrono::seconds;

const std::string kSource = CIFAR_SOURCE_DIR;
const std::string kScripts = kSource + "/tests/integration/control-plane/";

class OwnControlPlane {
 public:
  OwnControlPlane() {
    const auto started = run_process({kScripts + "start.sh", dir_.path().string()});
    if (started.exit_code != 0) throw std::runtime_error("start.sh failed: " + started.output);
  }
  ~OwnControlPlane() { run_process({kScripts + "stop.sh", dir_.path().string()}); }
  OwnControlPlane(const OwnControlPlane&) = delete;
  OwnControlPlane& operator=(const OwnControlPlane&) = delete;

  [[nodiscard]] std::string kubeconfig() const { return (dir_.path() / "kubeconfig").string(); }
  void restart_apiserver() const {
    const auto restarted = run_process({kScripts + "restart-apiserver.sh", dir_.path().string()});
    if (restarted.exit_code != 0) throw std::runtime_error(restarted.output);
  }

 private:
  cifar::testing::TempDir dir_;
};

json job(const std::string& name) {
  return {{"apiVersion", "cifartrain.io/v1alpha1"},
          {"kind", "CifarTrainJob"},
          {"metadata", {{"name", name}}},
          {"spec", json::parse(R"({"image": "i", "model": {"name": "resnet20"},
             "dataset": {"name": "synthetic"}, "strategy": {"type": "AllReduce"},
             "replicaSpecs": {"Worker": {"replicas": 2}}})")}};
}

TEST(OperatorAcrossApiserverRestart, WatchesRecoverAndNewJobsGetTheirPods) {
  const OwnControlPlane plane;
  const auto crd =
      run_process({"kubectl", "--kubeconfig", plane.kubeconfig(), "apply", "--server-side", "-f",
                   kSource + "/deploy/crds/cifartrain.io_cifartrainjobs.yaml"});
  ASSERT_EQ(crd.exit_code, 0) << crd.output;
  ASSERT_EQ(run_process({"kubectl", "--kubeconfig", plane.kubeconfig(), "wait",
                         "--for=condition=Established", "--timeout=60s",
                         "crd/cifartrainjobs.cifartrain.io"})
                .exit_code,
            0);
  cifar::testing::TempDir logs;
  cifar::testing::ChildProcess op(
      // A renew deadline longer than the restart: the leader keeps its Lease across the outage
      // (with the default 10 s it would step down and exit, as client-go's leaders do).
      {CIFAR_OPERATOR_BIN, "--kubeconfig", plane.kubeconfig(), "--namespace", "default",
       "--metrics-port", "0", "--health-port", "0", "--leader-elect-lease-duration", "90",
       "--leader-elect-renew-deadline", "80"},
      logs.path() / "operator.log");
  cifar::kube::Client client(cifar::kube::load_kubeconfig(plane.kubeconfig()));
  std::string last_error;
  const auto pods = [&](const std::string& name) {
    std::set<std::string> names;
    try {
      // Kept in a variable: a range-for over a member of a temporary would dangle.
      const auto listed =
          client.list(cifar::kube::pods("default"), cifar::testing::labelled_with_job(name));
      for (const auto& p : listed["items"]) names.insert(p["metadata"]["name"]);
    } catch (const cifar::kube::ApiError& e) {  // the apiserver is coming back
      last_error = e.what();
    }
    return names;
  };
  client.create(cifar::testing::cifartrainjobs("default"), job("before"));
  ASSERT_TRUE(cifar::testing::wait_for(
      [&] {
        return pods("before") == std::set<std::string>{"before-worker-0", "before-worker-1"};
      },
      seconds(30)))
      << last_error << "\n"
      << cifar::testing::read_file(logs.path() / "operator.log");

  plane.restart_apiserver();
  client.create(cifar::testing::cifartrainjobs("default"), job("after"));
  EXPECT_TRUE(cifar::testing::wait_for(
      [&] {
        return pods("after") == std::set<std::string>{"after-worker-0", "after-worker-1"};
      },
      seconds(60)))
      << last_error << "\n"
      << cifar::testing::read_file(logs.path() / "operator.log");
  EXPECT_TRUE(op.running());
  const auto log = cifar::testing::read_file(logs.path() / "operator.log");
  EXPECT_NE(log.find("listing again"), std::string::npos) << log;  // it noticed and relisted
}

}  // namespace
