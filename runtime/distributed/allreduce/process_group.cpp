#include "distributed/allreduce/process_group.h"

#include <spdlog/spdlog.h>
#include <torch/cuda.h>
#include <torch/version.h>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#ifdef CIFAR_WITH_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <chrono>
#include <stdexcept>
#include <type_traits>
#include <utility>

namespace cifar::allreduce {
namespace {

bool is_loopback(const std::string& host) {
  return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1";
}

#if TORCH_VERSION_MAJOR >= 2
// Since PyTorch 2.0 ProcessGroupGloo and ProcessGroupNCCL are c10d::Backends: a c10d::ProcessGroup
// holds them and hands each collective to the backend registered for its tensors' device type.
// Its constructor lost the Options argument (and gained setDefaultBackend) on the way to 2.11;
// templates let the branch that does not apply go uncompiled.
template <typename Group>
c10::intrusive_ptr<Group> make_group(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                     int size, const std::string& backend,
                                     std::chrono::milliseconds timeout) {
  if constexpr (std::is_constructible_v<Group, const c10::intrusive_ptr<c10d::Store>&, int, int>) {
    return c10::make_intrusive<Group>(store, rank, size);
  } else {
    return c10::make_intrusive<Group>(
        store, rank, size, c10::make_intrusive<typename Group::Options>(backend, timeout));
  }
}

template <typename Group, typename = void>
struct has_set_default_backend : std::false_type {};
template <typename Group>
struct has_set_default_backend<Group, std::void_t<decltype(std::declval<Group&>().setDefaultBackend(
                                          Group::BackendType::GLOO))>> : std::true_type {};

template <typename Group>
void set_default_backend(Group& group, typename Group::BackendType type) {
  if constexpr (has_set_default_backend<Group>::value) group.setDefaultBackend(type);
}
#endif

}  // namespace

std::string describe_peers(const c10d::ProcessGroup& group) {
  const int others = group.getSize() - 1;
  return "rank " + std::to_string(group.getRank()) + "'s group: " +
         (others == 1 ? std::string("the other rank")
                      : "the other " + std::to_string(others) + " ranks");
}

Backend resolve_backend(Backend requested, const std::string& device) {
  const bool cuda = device.rfind("cuda", 0) == 0;
  const Backend backend =
      requested == Backend::kAuto ? (cuda ? Backend::kNccl : Backend::kGloo) : requested;
  if (backend == Backend::kNccl) {
#ifndef CIFAR_WITH_NCCL
    throw std::invalid_argument(
        "--dist-backend nccl: this cifar-train was built without NCCL (CUDA LibTorch); use gloo");
#endif
    if (!cuda) throw std::invalid_argument("--dist-backend nccl needs -c cuda");
  }
  return backend;
}

c10::intrusive_ptr<c10d::ProcessGroup> make_process_group(
    const c10::intrusive_ptr<c10d::Store>& store, const Options& options,
    [[maybe_unused]] Backend backend) {  // (unused where LibTorch 1.x has no NCCL)
  const auto timeout =
      std::chrono::milliseconds(static_cast<int64_t>(options.timeout_seconds * 1000));
  const auto make_gloo = [&](const c10::intrusive_ptr<c10d::Store>& gloo_store) {
    auto gloo_options = c10d::ProcessGroupGloo::Options::create(timeout);
    // A job on one machine talks over loopback; across machines over the interface of this
    // host's name (the pod's address in Kubernetes).
    auto device = is_loopback(options.master_addr)
                      ? c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1")
                      : c10d::ProcessGroupGloo::createDefaultDevice();
    // Which interface and address the peers reach this rank on (the e2e tests check it is the
    // pod's own, across nodes).
    spdlog::info("rank {}: gloo device {}", options.rank, device->str());
    gloo_options->devices.push_back(std::move(device));
    gloo_options->threads = 2;
    return c10::make_intrusive<c10d::ProcessGroupGloo>(gloo_store, options.rank, options.world_size,
                                                       gloo_options);
  };
#if TORCH_VERSION_MAJOR >= 2
  using Group = c10d::ProcessGroup;
  auto group = make_group<Group>(store, options.rank, options.world_size,
                                 contract::name_of(kBackendNames, backend), timeout);
  // CPU tensors (the resume step's broadcast, the replica digest) always take Gloo, as with
  // torch.distributed's "cpu:gloo,cuda:nccl"; each backend rendezvouses under its own prefix.
  auto gloo = make_gloo(c10::make_intrusive<c10d::PrefixStore>("gloo", store));
  group->setBackend(c10::DeviceType::CPU, Group::BackendType::GLOO, gloo);
#ifdef CIFAR_WITH_NCCL
  if (backend == Backend::kNccl) {
    auto nccl_options = c10d::ProcessGroupNCCL::Options::create();
    nccl_options->timeout = timeout;
    set_default_backend(*group, Group::BackendType::NCCL);
    group->setBackend(c10::DeviceType::CUDA, Group::BackendType::NCCL,
                      c10::make_intrusive<c10d::ProcessGroupNCCL>(
                          c10::make_intrusive<c10d::PrefixStore>("nccl", store), options.rank,
                          options.world_size, nccl_options));
    return group;
  }
#endif
  set_default_backend(*group, Group::BackendType::GLOO);
  group->setBackend(c10::DeviceType::CUDA, Group::BackendType::GLOO, gloo);  // CUDA tensors too
  return group;
#else
#ifdef CIFAR_WITH_NCCL
  if (backend == Backend::kNccl) {
    auto nccl_options = c10d::ProcessGroupNCCL::Options::create();
    nccl_options->timeout = timeout;
    return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, options.rank, options.world_size,
                                                       nccl_options);
  }
#endif
  return make_gloo(store);
#endif
}

}  // namespace cifar::allreduce
