// The Helm chart's life on the local cluster. deploy/local-cluster/start.sh installed the
// operator with `helm install` (release cifar-operator, namespace cifartrain-system), and every
// other e2e test runs its jobs on that install. Here: `helm test`; `helm upgrade` to a chart whose
// CRD gained a field (the API server serves the new schema) and with changed values (the
// operator rolls out with them); `helm uninstall` leaves nothing of the release behind but the
// CRD and the jobs; a new `helm install` adopts the kept CRD, and a job left suspended across all
// of it then runs to Succeeded. The test leaves the operator installed as start.sh did.
#include <regex>

#include "tests/e2e/cluster_fixture.h"

namespace cifar::e2e {
namespace {

namespace fs = std::filesystem;

const std::string kRelease = "cifar-operator";
const std::string kOperatorNamespace = "cifartrain-system";
const fs::path kChart = fs::path(CIFAR_SOURCE_DIR) / "deploy/helm/cifar-operator";
// start.sh's install: the chart's defaults but what its values file says (progress every 5 s, the
// operator on node 1).
std::vector<std::string> install_values() { return {"-f", cluster_file("operator-values.yaml")}; }

std::string trimmed(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  return s;
}

// A copy of the chart whose CRD gained spec.upgradeCheck and whose version is 0.2.0: what a
// user's `helm upgrade` to a newer chart brings.
fs::path newer_chart(const fs::path& dir) {
  auto chart = dir / "cifar-operator";
  fs::remove_all(chart);
  fs::copy(kChart, chart, fs::copy_options::recursive);
  // A text edit, not a YAML round trip, which would change what it does not mean to (an
  // unquoted "True" in an enum reads back as a boolean).
  const auto crd_path = chart / "files/crds/cifartrain.io_cifartrainjobs.yaml";
  auto crd = cifar::testing::read_file(crd_path);
  const std::string anchor = "\n              image:\n";  // the first property of spec
  const auto at = crd.find(anchor);
  if (at == std::string::npos || crd.find(anchor, at + 1) != std::string::npos) {
    throw std::runtime_error("the CRD's spec.image property is not where the test expects it");
  }
  crd.insert(at + 1, "              upgradeCheck: {type: string}\n");
  std::ofstream(crd_path) << crd;
  const auto chart_yaml = chart / "Chart.yaml";
  const auto text = cifar::testing::read_file(chart_yaml);
  std::ofstream(chart_yaml) << std::regex_replace(text, std::regex("\nversion: [^\n]*"),
                                                  "\nversion: 0.2.0");
  return chart;
}

class Helm : public Cluster {
 protected:
  cifar::testing::ProcessResult helm(std::vector<std::string> args) {
    args.insert(args.begin(), {helm_, "--kubeconfig", cluster_file("kubeconfig"), "--namespace",
                               kOperatorNamespace});
    return run_process(args);
  }
  cifar::testing::ProcessResult install(const fs::path& chart, const std::string& verb,
                                        std::vector<std::string> values) {
    std::vector<std::string> args = {verb, kRelease, chart.string(), "--wait", "--timeout", "180s"};
    args.insert(args.end(), values.begin(), values.end());
    return helm(args);
  }
  bool released() { return helm({"status", kRelease}).exit_code == 0; }

  // A failed step must leave the other e2e tests the operator start.sh installed.
  void TearDown() override {
    if (HasFailure()) {
      const auto restored = install(kChart, released() ? "upgrade" : "install", install_values());
      EXPECT_EQ(restored.exit_code, 0) << restored.output;
    }
    Cluster::TearDown();
  }

  // `kubectl apply --dry-run=server`: the job as the API server would store it, or why it is
  // refused (kubectl's strict field validation refuses a field the served schema lacks).
  cifar::testing::ProcessResult dry_run(const std::string& manifest) {
    const auto path = volumes_ / "dry-run.yaml";
    std::ofstream(path) << manifest;
    return kubectl({"apply", "-n", ns_, "--dry-run=server", "-o", "json", "-f", path});
  }
  bool refused_as_unknown(const std::string& manifest) {
    const auto out = dry_run(manifest);
    return out.exit_code != 0 &&
           out.output.find(R"(unknown field "spec.upgradeCheck")") != std::string::npos;
  }

  // What the release labels across the cluster (kinds the chart makes, and their children).
  std::string objects_of_the_release() {
    const auto selector = "app.kubernetes.io/instance=" + kRelease;
    std::string found;
    for (const std::string kinds :
         {"deployments,replicasets,pods,services,serviceaccounts,configmaps,roles,rolebindings",
          "clusterroles,clusterrolebindings"}) {
      found += kubectl({"get", kinds, "-A", "-l", selector, "-o", "name"}).output;
    }
    // Helm's own record of the release.
    found += kubectl({"get", "secrets", "-n", kOperatorNamespace, "-l",
                      "owner=helm,name=" + kRelease, "-o", "name"})
                 .output;
    return trimmed(found);
  }

  // The pinned Helm that start.sh installed with.
  std::string helm_ = (tool_dir("helm") / "helm").string();
};

TEST_F(Helm, TestUpgradeUninstallAndReinstallKeepTheCrdAndTheJobs) {
  // The release's namespace enforces Pod Security Admission's restricted level (start.sh labels
  // it, as a shared cluster would): the operator's pods (those of the upgrade below too) and
  // helm test's pod are admitted there.
  EXPECT_EQ(kubectl({"get", "namespace", kOperatorNamespace, "-o",
                     R"(jsonpath={.metadata.labels.pod-security\.kubernetes\.io/enforce})"})
                .output,
            "restricted");
  // helm test: its pod reaches the operator's metrics through the Service.
  const auto tested = helm({"test", kRelease, "--timeout", "120s"});
  ASSERT_EQ(tested.exit_code, 0) << tested.output;
  EXPECT_NE(tested.output.find("Succeeded"), std::string::npos) << tested.output;

  // A job that waits, suspended, through the upgrade, the uninstall and the reinstall.
  data_and_checkpoint_volumes();
  submit("kept", "  strategy: {type: AllReduce, allReduce: {backend: gloo}}\n",
         "    Worker: {replicas: 1}\n", "  runPolicy: {suspend: true}\n");
  ASSERT_TRUE(wait_for_state("kept", "Suspended", seconds(60))) << state("kept");

  const std::string probe =
      "apiVersion: cifartrain.io/v1alpha1\nkind: CifarTrainJob\nmetadata: {name: probe}\n"
      "spec:\n  upgradeCheck: served\n  model: {name: simplecnn}\n"
      "  dataset: {name: cifar10, volume: {claimName: cifar10}}\n"
      "  strategy: {type: AllReduce}\n  replicaSpecs:\n    Worker: {replicas: 1}\n";
  EXPECT_TRUE(refused_as_unknown(probe)) << dry_run(probe).output;

  // helm upgrade: a newer chart (its CRD gained a field) and changed values.
  const auto work = volumes_ / "charts";
  fs::create_directories(work);
  auto values = install_values();
  values.insert(values.end(), {"--set", "workers=3", "--set", "podLabels.upgraded=yes"});
  const auto upgraded = install(newer_chart(work), "upgrade", values);
  ASSERT_EQ(upgraded.exit_code, 0) << upgraded.output;
  const auto stored = dry_run(probe);
  ASSERT_EQ(stored.exit_code, 0) << "helm upgrade did not upgrade the CRD: " << stored.output;
  EXPECT_EQ(json::parse(stored.output)["spec"].value("upgradeCheck", ""), "served");
  const auto deployment = json::parse(
      kubectl({"get", "deployment", kRelease, "-n", kOperatorNamespace, "-o", "json"}).output);
  const auto& pod_spec = deployment["spec"]["template"];
  EXPECT_EQ(pod_spec["metadata"]["labels"].value("upgraded", ""), "yes");
  const auto args = pod_spec["spec"]["containers"][0]["args"].dump();
  EXPECT_NE(args.find("--workers=3"), std::string::npos) << args;
  EXPECT_EQ(deployment["status"].value("readyReplicas", 0), 1) << deployment["status"].dump();
  const auto history = helm({"history", kRelease, "-o", "json"});
  EXPECT_NE(history.output.find("cifar-operator-0.2.0"), std::string::npos) << history.output;

  // helm uninstall: nothing of the release is left but the CRD; the jobs stay.
  const auto uninstalled = helm({"uninstall", kRelease, "--wait", "--timeout", "120s"});
  ASSERT_EQ(uninstalled.exit_code, 0) << uninstalled.output;
  EXPECT_TRUE(wait_for([&] { return objects_of_the_release().empty(); }, seconds(60)))
      << objects_of_the_release();
  EXPECT_EQ(kubectl({"get", "crd", "cifartrainjobs.cifartrain.io"}).exit_code, 0);
  EXPECT_EQ(state("kept"), "Suspended");

  // helm install again: it adopts the kept CRD (back to this chart's schema), and the job that
  // waited runs to the end under the new operator.
  const auto reinstalled = install(kChart, "install", install_values());
  ASSERT_EQ(reinstalled.exit_code, 0) << reinstalled.output;
  EXPECT_TRUE(refused_as_unknown(probe)) << dry_run(probe).output;
  const auto resumed = kubectl({"patch", "ctj", "kept", "-n", ns_, "--type=merge", "-p",
                                R"({"spec":{"runPolicy":{"suspend":false}}})"});
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_TRUE(wait_for_state("kept", "Succeeded", seconds(300))) << state("kept");
}

}  // namespace
}  // namespace cifar::e2e
