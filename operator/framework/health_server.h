// /healthz (the process serves) and /readyz (the given check holds) over HTTP, for the
// kubelet's probes.
#pragma once

#include <functional>
#include <memory>
#include <string>

namespace cifar::op {

class HealthServer {
 public:
  // `address`: "http://0.0.0.0:8081".
  HealthServer(const std::string& address, std::function<bool()> ready);
  ~HealthServer();
  HealthServer(const HealthServer&) = delete;
  HealthServer& operator=(const HealthServer&) = delete;

 private:
  class Listener;
  std::unique_ptr<Listener> listener_;
};

}  // namespace cifar::op
