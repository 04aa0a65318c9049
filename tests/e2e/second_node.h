// The cluster's second node, for the cases that take it away from the jobs on it (a death, a
// partition: node.sh), and bring it back whatever failed. Such cases take the whole cluster
// (EXCLUSIVE in CMakeLists.txt): other cases' pods would go with the node.
#pragma once

#include <filesystem>
#include <string>

#include "tests/e2e/cluster_fixture.h"

namespace cifar::e2e {

class SecondNode : public Cluster {
 protected:
  static constexpr int kSecondNode = 2;

  // Whatever failed, the next tests need both nodes: `restore` ("start" after a kill, "heal"
  // after a partition) runs if the node is still away.
  void TearDown() override {
    if (!restore_.empty()) node(restore_);
    Cluster::TearDown();
  }

  // node.sh COMMAND on the cluster's second node (as root, which the e2e tests are).
  cifar::testing::ProcessResult node(const std::string& command) {
    return run_process(
        {(std::filesystem::path(CIFAR_SOURCE_DIR) / "deploy/local-cluster/node.sh").string(),
         command, (e2e_dir() / "cluster").string(), std::to_string(kSecondNode)});
  }
  std::string second_node() {
    auto name = node("name").output;
    while (!name.empty() && name.back() == '\n') name.pop_back();
    return name;
  }
  std::string node_ready(const std::string& name) {
    return kubectl({"get", "node", name, "-o",
                    R"(jsonpath={.status.conditions[?(@.type=="Ready")].status})"})
        .output;
  }

  std::string restore_;  // what brings the node back while it is away ("": it is there)
};

}  // namespace cifar::e2e
