#pragma once

#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "api.grpc.pb.h"

namespace cifar::fake_gpu {

// The IDs of a node's fake GPUs, GPU-fake-<node>-<index>: unique across the cluster, as a real
// GPU's UUID is, so that a pod's NVIDIA_VISIBLE_DEVICES says which node's devices it got.
std::vector<std::string> device_ids(const std::string& node, int count);

// The kubelet's DevicePlugin service over devices that are not there. ListAndWatch reports them
// all healthy; Allocate gives a container the env NVIDIA's device plugin gives it
// (NVIDIA_VISIBLE_DEVICES: the IDs it was allocated) and nothing else (no device nodes, no driver
// mounts). Which devices a pod gets, and when they are free again, is the kubelet's bookkeeping.
class FakeGpuPlugin final : public v1beta1::DevicePlugin::Service {
 public:
  explicit FakeGpuPlugin(std::vector<std::string> ids);

  // Ends every ListAndWatch stream: a server's Shutdown waits for its calls to return.
  void stop();

  grpc::Status GetDevicePluginOptions(grpc::ServerContext* context, const v1beta1::Empty* request,
                                      v1beta1::DevicePluginOptions* response) override;
  grpc::Status ListAndWatch(grpc::ServerContext* context, const v1beta1::Empty* request,
                            grpc::ServerWriter<v1beta1::ListAndWatchResponse>* writer) override;
  grpc::Status Allocate(grpc::ServerContext* context, const v1beta1::AllocateRequest* request,
                        v1beta1::AllocateResponse* response) override;
  grpc::Status PreStartContainer(grpc::ServerContext* context,
                                 const v1beta1::PreStartContainerRequest* request,
                                 v1beta1::PreStartContainerResponse* response) override;

 private:
  std::vector<std::string> ids_;
  std::mutex mutex_;
  std::condition_variable stopping_changed_;
  bool stopping_ = false;
};

}  // namespace cifar::fake_gpu
