// A PS's stripes served over gRPC (the PS role that runs them: parameter_server.h).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "distributed/ps/shard.h"
#include "distributed/ps/token_auth.h"

namespace grpc {
class Server;
}

namespace cifar::ps {

class ParameterServerService;

// A PS's stripes served on `address` ("host:port", port 0 picks one), behind `door` (the job's
// TLS and token: token_auth.h). Messages over `max_message_bytes` are refused. `incarnation`:
// this PS's (membership.h; 0: none), which calls may expect newer.
class ShardServer {
 public:
  ShardServer(std::vector<std::shared_ptr<Shard>> stripes, const std::string& address,
              DoorOptions door, int64_t max_message_bytes, int64_t incarnation = 0);
  // One stripe.
  ShardServer(std::shared_ptr<Shard> shard, const std::string& address, DoorOptions door,
              int64_t max_message_bytes);
  ~ShardServer();
  ShardServer(const ShardServer&) = delete;
  ShardServer& operator=(const ShardServer&) = delete;

  [[nodiscard]] int port() const { return port_; }
  [[nodiscard]] Shard& shard(int stripe = 0) { return *stripes_.at(static_cast<size_t>(stripe)); }
  // From now on every reply to a push or pull says that this PS is stopping, so that the master
  // checkpoints the shards' state before it goes (parameter_server.h).
  void announce_stop();
  // The incarnation that replaced this PS, as a trainer's call said; nullopt: none.
  [[nodiscard]] std::optional<int64_t> replaced_by() const;

 private:
  std::vector<std::shared_ptr<Shard>> stripes_;
  std::unique_ptr<ParameterServerService> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

// "host:port" -> "0.0.0.0:port": a PS listens on every interface of its pod.
std::string listen_address(const std::string& advertised);

}  // namespace cifar::ps
