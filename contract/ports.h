// The ports a job's pods listen on: in the pods' specs and the headless Service (operator), and
// the runtime's defaults. Names are the Service's and the containers' port names.
#pragma once

#include <string_view>

namespace cifar::contract {

struct NamedPort {
  std::string_view name;
  int number;
};

inline constexpr NamedPort kGrpcPort{"grpc", 2222};        // parameter servers (TF_CONFIG)
inline constexpr NamedPort kC10dStorePort{"c10d", 29500};  // all-reduce rank 0's TCPStore
inline constexpr NamedPort kMetricsPort{"metrics", 9464};  // Prometheus /metrics

}  // namespace cifar::contract
