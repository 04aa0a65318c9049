// Jobs that ask for GPUs on the local cluster's GPU node (start.sh --gpus: node 2 has four fake
// nvidia.com/gpu, advertised by a device plugin through the kubelet's device plugin API, with
// NVIDIA's node labels and the RuntimeClass nvidia). The devices are not there, so the jobs that
// must train run cifar-train on the CPU (training.device: cpu) while holding GPUs: what is tested
// is the operator, the scheduler and the kubelet's device accounting, not CUDA.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/e2e/cluster_fixture.h"

namespace cifar::e2e {
namespace {

const std::string kNccl = "  strategy: {type: AllReduce, allReduce: {backend: nccl}}\n";

class GpuNodes : public Cluster {
 protected:
  // The nodes labelled as GPU nodes (nvidia.com/gpu.present=true), as NVIDIA's GPU operator does.
  std::set<std::string> gpu_nodes() {
    std::istringstream names(kubectl({"get", "nodes", "-l", "nvidia.com/gpu.present=true", "-o",
                                      "jsonpath={.items[*].metadata.name}"})
                                 .output);
    std::set<std::string> nodes;
    for (std::string name; names >> name;) nodes.insert(name);
    return nodes;
  }

  // A variable of the environment the pod's process was started with (the kubelet's, the device
  // plugin's and the spec's together), from /proc on this machine; "" if it has none.
  std::string process_env(const std::string& pod_name, const std::string& variable) {
    std::ifstream environ("/proc/" + std::to_string(container_pid(pod_name)) + "/environ");
    for (std::string entry; std::getline(environ, entry, '\0');) {
      if (entry.rfind(variable + "=", 0) == 0) return entry.substr(variable.size() + 1);
    }
    return "";
  }

  static bool tolerates_gpu_nodes(const json& pod_object) {
    for (const auto& t : pod_object["spec"].value("tolerations", json::array())) {
      if (t.value("key", "") == "nvidia.com/gpu" && t.value("effect", "") == "NoSchedule") {
        return true;
      }
    }
    return false;
  }
};

TEST_F(GpuNodes, TheGpuExampleRunsOnTheGpuNodeEachWorkerWithDevicesOfItsOwn) {
  const auto gpu = gpu_nodes();
  ASSERT_EQ(gpu.size(), 1U) << "the e2e cluster has one GPU node (start.sh --gpus)";
  const auto gpu_node = *gpu.begin();
  data_and_checkpoint_volumes();
  device_ = "cpu";
  // deploy/examples/gpu-allreduce-job.yaml's shape, on gloo: 2 workers, one GPU each.
  submit("gpuex", kAllReduce, gpu_workers(2, 1),
         "  runPolicy: {restartPolicy: ExitCode, backoffLimit: 3}\n", "cifar10", 2);
  // What the device plugin's Allocate gave each container, read from its process as soon as it
  // runs: the job is short, and under load a look after both had started found one ended (CI).
  std::map<std::string, std::string> visible_devices;
  ASSERT_TRUE(wait_for(
      [&] {
        for (const auto* name : {"gpuex-worker-0", "gpuex-worker-1"}) {
          if (visible_devices.count(name) > 0) continue;
          try {
            if (container_pid(name) <= 0) continue;
          } catch (const cifar::kube::ApiError&) {  // not created yet
            continue;
          }
          if (auto visible = process_env(name, "NVIDIA_VISIBLE_DEVICES"); !visible.empty()) {
            visible_devices.emplace(name, std::move(visible));
          }
        }
        return visible_devices.size() == 2;
      },
      seconds(120)))
      << "NVIDIA_VISIBLE_DEVICES found in " << visible_devices.size()
      << " of the 2 workers' processes\n"
      << diagnose("gpuex");
  std::set<std::string> devices;
  for (const auto* name : {"gpuex-worker-0", "gpuex-worker-1"}) {
    const auto p = pod(name);
    EXPECT_EQ(p["spec"].value("nodeName", ""), gpu_node) << name;
    EXPECT_EQ(p["spec"].value("runtimeClassName", ""), "nvidia") << name;
    // The RuntimeClass's scheduling: its nodeSelector, merged into the pod at admission.
    EXPECT_EQ(p["spec"]["nodeSelector"].value("nvidia.com/gpu.present", ""), "true") << name;
    EXPECT_TRUE(tolerates_gpu_nodes(p)) << p["spec"].dump();
    // One device of that node.
    const auto& visible = visible_devices.at(name);
    EXPECT_EQ(visible.rfind("GPU-fake-" + gpu_node + "-", 0), 0U) << name << ": " << visible;
    EXPECT_EQ(visible.find(','), std::string::npos) << name << ": " << visible;
    devices.insert(visible);
    std::cerr << name << " on " << gpu_node << ": NVIDIA_VISIBLE_DEVICES=" << visible << "\n";
  }
  EXPECT_EQ(devices.size(), 2U) << "both workers were given the same device";
  ASSERT_TRUE(wait_for_state("gpuex", "Succeeded", seconds(300))) << diagnose("gpuex");
  EXPECT_EQ(status_of("gpuex").value("restarts", -1), 0);
}

TEST_F(GpuNodes, AnNcclJobGoesToGpuNodesOnlyAndWithoutCudaFailsSayingWhyNotInALoop) {
  data_and_checkpoint_volumes();
  // nccl without GPUs: refused for what it is.
  submit("ncclnogpu", kNccl, "    Worker: {replicas: 2}\n");
  // nccl with GPUs (training.device auto: -c cuda), on GPUs that are not there. cleanPodPolicy
  // None: its failed pods are looked at after the job ended.
  submit("ncclfake", kNccl, gpu_workers(2, 1),
         "  runPolicy: {restartPolicy: ExitCode, backoffLimit: 3, cleanPodPolicy: None}\n");
  ASSERT_TRUE(wait_for_state("ncclnogpu", "Failed", seconds(60))) << diagnose("ncclnogpu");
  const auto refused = status_of("ncclnogpu");
  EXPECT_EQ(refused.value("reason", ""), "InvalidSpec") << refused.dump();
  EXPECT_NE(refused.value("message", "").find("nccl needs nvidia.com/gpu"), std::string::npos)
      << refused.dump();
  EXPECT_TRUE(pods_of("ncclnogpu").empty());

  ASSERT_TRUE(wait_for_state("ncclfake", "Failed", seconds(180))) << diagnose("ncclfake");
  const auto failed = status_of("ncclfake");
  const auto message = failed.value("message", "");
  std::cerr << "ncclfake: " << failed.value("reason", "") << ": " << message << "\n";
  EXPECT_NE(message.find("no CUDA device is available"), std::string::npos) << failed.dump();
  EXPECT_NE(message.find("NVIDIA_VISIBLE_DEVICES"), std::string::npos) << failed.dump();
  EXPECT_NE(message.find("training.device: cpu"), std::string::npos) << failed.dump();
  // Exit 2 (a configuration the job cannot run with) is not retried: no restart, no crash loop.
  EXPECT_EQ(failed.value("restarts", -1), 0) << failed.dump();
  const auto gpu = gpu_nodes();
  const auto pods = pods_of("ncclfake");
  EXPECT_EQ(pods.size(), 2U);
  for (const auto& p : pods) {
    EXPECT_EQ(gpu.count(p["spec"].value("nodeName", "")), 1U) << p["spec"].dump();
    EXPECT_EQ(restart_count_of(p), 0);
  }
}

TEST_F(GpuNodes, AJobAskingForMoreGpusThanAnyNodeHasIsReportedUnschedulable) {
  data_and_checkpoint_volumes();
  device_ = "cpu";
  submit("toomany", kAllReduce, gpu_workers(1, 8));
  ASSERT_TRUE(wait_for([&] { return status_of("toomany").value("reason", "") == "Unschedulable"; },
                       seconds(60)))
      << diagnose("toomany");
  const auto status = status_of("toomany");
  EXPECT_NE(status.value("message", "").find("Insufficient nvidia.com/gpu"), std::string::npos)
      << status.dump();
  EXPECT_EQ(phase("toomany-worker-0"), "Pending");
}

}  // namespace
}  // namespace cifar::e2e
