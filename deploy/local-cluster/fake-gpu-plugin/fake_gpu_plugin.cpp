#include "fake_gpu_plugin.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <utility>

namespace cifar::fake_gpu {

namespace {
constexpr char kHealthy[] = "Healthy";  // the API's constant (deviceplugin/v1beta1/constants.go)
}  // namespace

std::vector<std::string> device_ids(const std::string& node, int count) {
  std::vector<std::string> ids;
  ids.reserve(count);
  for (int i = 0; i < count; ++i) ids.push_back("GPU-fake-" + node + "-" + std::to_string(i));
  return ids;
}

FakeGpuPlugin::FakeGpuPlugin(std::vector<std::string> ids) : ids_(std::move(ids)) {}

void FakeGpuPlugin::stop() {
  {
    const std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  stopping_changed_.notify_all();
}

grpc::Status FakeGpuPlugin::GetDevicePluginOptions(grpc::ServerContext* /*context*/,
                                                   const v1beta1::Empty* /*request*/,
                                                   v1beta1::DevicePluginOptions* /*response*/) {
  return grpc::Status::OK;  // neither PreStartContainer nor GetPreferredAllocation is needed
}

grpc::Status FakeGpuPlugin::ListAndWatch(
    grpc::ServerContext* context, const v1beta1::Empty* /*request*/,
    grpc::ServerWriter<v1beta1::ListAndWatchResponse>* writer) {
  v1beta1::ListAndWatchResponse devices;
  for (const auto& id : ids_) {
    auto* device = devices.add_devices();
    device->set_id(id);
    device->set_health(kHealthy);
  }
  if (!writer->Write(devices)) return grpc::Status::CANCELLED;
  spdlog::info("the kubelet watches: {} devices, all healthy", ids_.size());
  // The devices never change: the stream stays open until the kubelet or this plugin ends it.
  std::unique_lock lock(mutex_);
  while (!stopping_ && !context->IsCancelled()) {
    stopping_changed_.wait_for(lock, std::chrono::seconds(1));
  }
  return grpc::Status::OK;
}

grpc::Status FakeGpuPlugin::Allocate(grpc::ServerContext* /*context*/,
                                     const v1beta1::AllocateRequest* request,
                                     v1beta1::AllocateResponse* response) {
  for (const auto& container : request->container_requests()) {
    std::string visible;
    for (const auto& id : container.devices_ids()) {
      if (std::find(ids_.begin(), ids_.end(), id) == ids_.end()) {
        return {grpc::StatusCode::INVALID_ARGUMENT, "no device " + id + " on this node"};
      }
      visible += (visible.empty() ? "" : ",") + id;
    }
    (*response->add_container_responses()->mutable_envs())["NVIDIA_VISIBLE_DEVICES"] = visible;
    spdlog::info("allocated {}", visible);
  }
  return grpc::Status::OK;
}

grpc::Status FakeGpuPlugin::PreStartContainer(grpc::ServerContext* /*context*/,
                                              const v1beta1::PreStartContainerRequest* /*request*/,
                                              v1beta1::PreStartContainerResponse* /*response*/) {
  return grpc::Status::OK;
}

}  // namespace cifar::fake_gpu
