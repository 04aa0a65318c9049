#include "kube/kubeconfig.h"

#include <cpprest/asyncrt_utils.h>
#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace cifar::kube {
namespace {

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string base64_decode(const std::string& text) {
  try {
    const auto bytes = utility::conversions::from_base64(utility::conversions::to_string_t(text));
    return {bytes.begin(), bytes.end()};
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string("invalid base64 in kubeconfig: ") + e.what());
  }
}

// The entry of list `key` (clusters, users, contexts) named `name`, its inner `field` map.
YAML::Node named(const YAML::Node& root, const char* key, const std::string& name,
                 const char* field, const std::string& where) {
  for (const auto& entry : root[key]) {
    if (entry["name"] && entry["name"].as<std::string>() == name) return entry[field];
  }
  throw std::runtime_error(where + ": no " + std::string(key) + " entry named '" + name + "'");
}

// `<key>-data` (base64) or `<key>` (a file, relative to the kubeconfig's directory).
std::string data_or_file(const YAML::Node& node, const std::string& key,
                         const std::filesystem::path& base) {
  if (node[key + "-data"]) return base64_decode(node[key + "-data"].as<std::string>());
  if (node[key]) {
    std::filesystem::path file = node[key].as<std::string>();
    return read_text(file.is_absolute() ? file : base / file);
  }
  return "";
}

}  // namespace

ClusterAccess load_kubeconfig(const std::filesystem::path& path, const std::string& context) {
  const auto where = "kubeconfig " + path.string();
  YAML::Node root;
  try {
    root = YAML::LoadFile(path.string());
  } catch (const YAML::Exception& e) {
    throw std::runtime_error(where + ": " + e.what());
  }
  const auto base = path.parent_path();
  try {
    const auto context_name =
        context.empty() ? root["current-context"].as<std::string>("") : context;
    if (context_name.empty()) throw std::runtime_error(where + ": no current-context");
    const auto ctx = named(root, "contexts", context_name, "context", where);
    const auto cluster =
        named(root, "clusters", ctx["cluster"].as<std::string>(""), "cluster", where);
    const auto user = named(root, "users", ctx["user"].as<std::string>(""), "user", where);
    ClusterAccess access;
    access.server = cluster["server"].as<std::string>("");
    if (access.server.empty()) throw std::runtime_error(where + ": cluster has no server");
    access.ca_pem = data_or_file(cluster, "certificate-authority", base);
    access.insecure_skip_tls_verify = cluster["insecure-skip-tls-verify"].as<bool>(false);
    access.client_cert_pem = data_or_file(user, "client-certificate", base);
    access.client_key_pem = data_or_file(user, "client-key", base);
    access.bearer_token = user["token"].as<std::string>("");
    if (access.bearer_token.empty() && user["tokenFile"]) {
      access.bearer_token = read_text(user["tokenFile"].as<std::string>());
    }
    access.namespace_ = ctx["namespace"].as<std::string>("default");
    return access;
  } catch (const YAML::Exception& e) {
    throw std::runtime_error(where + ": " + e.what());
  }
}

ClusterAccess in_cluster_config(const std::filesystem::path& secrets_dir) {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (host == nullptr || port == nullptr) {
    throw std::runtime_error("not in a pod: KUBERNETES_SERVICE_HOST/PORT are not set");
  }
  ClusterAccess access;
  const std::string h = host;
  access.server = "https://" + (h.find(':') != std::string::npos ? "[" + h + "]" : h) + ":" + port;
  access.bearer_token = read_text(secrets_dir / "token");
  access.ca_pem = read_text(secrets_dir / "ca.crt");
  if (std::filesystem::exists(secrets_dir / "namespace")) {
    access.namespace_ = read_text(secrets_dir / "namespace");
  }
  return access;
}

ClusterAccess load_cluster_access(const std::string& kubeconfig) {
  if (!kubeconfig.empty()) return load_kubeconfig(kubeconfig);
  if (const char* env = std::getenv("KUBECONFIG"); env != nullptr && *env != '\0') {
    const std::string files = env;  // a ':'-separated list: the first file, as kubectl reads
    return load_kubeconfig(files.substr(0, files.find(':')));
  }
  if (std::getenv("KUBERNETES_SERVICE_HOST") != nullptr) return in_cluster_config();
  const char* home = std::getenv("HOME");
  if (home == nullptr) throw std::runtime_error("no kubeconfig: set KUBECONFIG or --kubeconfig");
  return load_kubeconfig(std::filesystem::path(home) / ".kube" / "config");
}

}  // namespace cifar::kube
