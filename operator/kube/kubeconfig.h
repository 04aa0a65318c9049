// Where the API server is and who we are to it: from a kubeconfig file (clusters, users,
// contexts; client certificates, bearer tokens, inline *-data or files) or, inside a pod, from
// the service account's mounted token and CA.
#pragma once

#include <filesystem>
#include <string>

namespace cifar::kube {

struct ClusterAccess {
  std::string server;           // https://host:port
  std::string ca_pem;           // empty: the system's trust store
  std::string client_cert_pem;  // with client_key_pem: TLS client authentication
  std::string client_key_pem;
  std::string bearer_token;
  std::string namespace_ = "default";  // the context's (or the pod's) namespace
  bool insecure_skip_tls_verify = false;
};

// Reads `path`, using `context` (empty: current-context). Throws std::runtime_error naming the
// file and what is missing or malformed.
ClusterAccess load_kubeconfig(const std::filesystem::path& path, const std::string& context = "");

// KUBERNETES_SERVICE_HOST/PORT and /var/run/secrets/kubernetes.io/serviceaccount (or
// `secrets_dir`); throws std::runtime_error when not inside a pod.
ClusterAccess in_cluster_config(
    const std::filesystem::path& secrets_dir = "/var/run/secrets/kubernetes.io/serviceaccount");

// What kubectl would use: `kubeconfig` if given, else $KUBECONFIG, else in-cluster config inside
// a pod, else ~/.kube/config.
ClusterAccess load_cluster_access(const std::string& kubeconfig = "");

}  // namespace cifar::kube
