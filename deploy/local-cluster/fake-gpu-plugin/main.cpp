// fake-gpu-plugin: advertises COUNT nvidia.com/gpu on this node through the kubelet's device
// plugin API, as NVIDIA's device plugin does for real GPUs. It serves the DevicePlugin service on
// a socket in the kubelet's device plugin directory and registers it with the kubelet; whenever
// the kubelet (re)starts, which removes the directory's sockets and makes its own anew, it serves
// and registers again.
//   fake-gpu-plugin --node NAME [--count 4] [--resource nvidia.com/gpu] [--dir DIR]
#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <csignal>
#include <ctime>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>

#include "fake_gpu_plugin.h"

namespace {

namespace fs = std::filesystem;
using cifar::fake_gpu::FakeGpuPlugin;

constexpr char kApiVersion[] = "v1beta1";
constexpr char kEndpoint[] = "cifar-fake-gpu.sock";  // our socket, in the kubelet's directory

// The kubelet socket's inode, 0 while there is none: a new inode is a kubelet that started anew.
ino_t inode_of(const fs::path& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

// One serving of the plugin: its service and the gRPC server on our socket.
struct Serving {
  std::unique_ptr<FakeGpuPlugin> plugin;
  std::unique_ptr<grpc::Server> server;

  Serving(const fs::path& socket, const std::vector<std::string>& ids)
      : plugin(std::make_unique<FakeGpuPlugin>(ids)) {
    std::error_code ignored;
    fs::remove(socket, ignored);
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix:" + socket.string(), grpc::InsecureServerCredentials());
    builder.RegisterService(plugin.get());
    server = builder.BuildAndStart();
    if (!server) throw std::runtime_error("cannot serve on " + socket.string());
  }
  Serving(const Serving&) = delete;
  Serving& operator=(const Serving&) = delete;
  Serving(Serving&&) = delete;
  Serving& operator=(Serving&&) = delete;
  ~Serving() {
    plugin->stop();
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  }
};

grpc::Status register_with(const fs::path& kubelet_socket, const std::string& resource) {
  auto channel =
      grpc::CreateChannel("unix:" + kubelet_socket.string(), grpc::InsecureChannelCredentials());
  auto registration = v1beta1::Registration::NewStub(channel);
  v1beta1::RegisterRequest request;
  request.set_version(kApiVersion);
  request.set_endpoint(kEndpoint);
  request.set_resource_name(resource);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1beta1::Empty reply;
  return registration->Register(&context, request, &reply);
}

// Serves and registers until SIGTERM or SIGINT.
void run(const std::string& node, int count, const std::string& resource, const fs::path& dir) {
  // SIGTERM/SIGINT are waited for, not handled: the main loop's tick is a timed sigwait.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  const auto ids = cifar::fake_gpu::device_ids(node, count);
  const auto kubelet_socket = dir / "kubelet.sock";
  const auto own_socket = dir / kEndpoint;
  std::unique_ptr<Serving> serving;
  ino_t registered_with = 0;
  bool waiting_said = false;
  while (true) {
    const auto kubelet = inode_of(kubelet_socket);
    if (kubelet == 0) {
      if (!waiting_said) spdlog::info("waiting for the kubelet's {}", kubelet_socket.string());
      waiting_said = true;
    } else if (kubelet != registered_with || !fs::exists(own_socket)) {
      serving.reset();
      serving = std::make_unique<Serving>(own_socket, ids);
      const auto status = register_with(kubelet_socket, resource);
      if (status.ok()) {
        registered_with = kubelet;
        spdlog::info("registered {} x {} ({}) with the kubelet", count, resource, kEndpoint);
      } else {
        spdlog::warn("the kubelet refused the registration: {} (again in 1 s)",
                     status.error_message());
      }
    }
    const timespec tick{1, 0};
    const int signal = sigtimedwait(&stop_signals, nullptr, &tick);
    if (signal == SIGTERM || signal == SIGINT) break;
  }
  spdlog::info("stopping");
}

}  // namespace

int main(int argc, char** argv) {
  try {
    CLI::App app{"A kubelet device plugin that advertises GPUs that are not there"};
    std::string node;
    int count = 4;
    std::string resource = "nvidia.com/gpu";
    fs::path dir = "/var/lib/kubelet/device-plugins";  // the kubelet's, a constant of its API
    app.add_option("--node", node, "the node's name (in the device IDs)")->required();
    app.add_option("--count", count, "how many devices")->check(CLI::Range(1, 64));
    app.add_option("--resource", resource, "the extended resource advertised");
    app.add_option("--dir", dir, "the kubelet's device plugin directory");
    CLI11_PARSE(app, argc, argv);

    run(node, count, resource, dir);
    return 0;
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return 1;
  }
}
