// A Kubernetes API client over cpprestsdk: typed errors from the server's Status objects, the
// verbs a controller needs (get, list, create, merge, strategic-merge or server-side-apply patch,
// delete, the status subresource) and watch as a stream of events. Objects are nlohmann::json;
// paths are built by ResourcePath. Thread-safe: every call is one HTTP request on a shared client.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "kube/kubeconfig.h"

namespace cifar::kube {

// A resource type, and optionally one object of it: /api/v1/namespaces/ns/pods/name,
// /apis/group/version/namespaces/ns/plural/name[/subresource].
struct ResourcePath {
  std::string group;  // "" for the core API
  std::string version;
  std::string plural;
  std::string namespace_;  // "" for cluster-scoped or all namespaces
  std::string name;
  std::string subresource;

  [[nodiscard]] ResourcePath named(const std::string& object_name) const;
  [[nodiscard]] ResourcePath in(const std::string& ns) const;
  [[nodiscard]] ResourcePath sub(const std::string& subresource_name) const;
  [[nodiscard]] std::string str() const;
};

ResourcePath pods(const std::string& ns = "");
ResourcePath services(const std::string& ns = "");
ResourcePath secrets(const std::string& ns = "");
ResourcePath network_policies(const std::string& ns = "");
ResourcePath events(const std::string& ns = "");
ResourcePath leases(const std::string& ns = "");
ResourcePath nodes();  // cluster-scoped

// An error status from the API server (404 NotFound, 409 AlreadyExists/Conflict, 410 Gone, 422
// Invalid, ...), or status 0 for no answer at all (connection refused, timeout).
class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string reason, const std::string& message)
      : std::runtime_error(message), status_(status), reason_(std::move(reason)) {}
  [[nodiscard]] int status() const { return status_; }
  [[nodiscard]] const std::string& reason() const { return reason_; }  // "NotFound", ...

 private:
  int status_;
  std::string reason_;
};

struct ListOptions {
  std::string label_selector;
  std::string field_selector;
  std::string resource_version;  // watch: start after it
};

// One page of a list: at most `limit` items (0: all), the one after the page whose
// metadata.continue `continue_token` is (empty: the first).
struct ListPage {
  int64_t limit = 0;
  std::string continue_token;
};

// application/merge-patch+json, strategic-merge-patch+json (built-in types only: it knows a list's
// merge key, e.g. takes one finalizer out of metadata.finalizers), apply-patch+yaml.
enum class PatchType { kMerge, kStrategicMerge, kApply };

struct WatchEvent {
  std::string type;  // ADDED, MODIFIED, DELETED, BOOKMARK, ERROR
  nlohmann::json object;
};

class Client {
 public:
  // `timeout`: of one request (a failed connection is retried once on a fresh one).
  explicit Client(ClusterAccess access, std::string field_manager = "cifar-operator",
                  std::chrono::milliseconds timeout = std::chrono::seconds(30));
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  nlohmann::json get(const ResourcePath& path);
  nlohmann::json list(const ResourcePath& path, const ListOptions& options = {},
                      const ListPage& page = {});
  nlohmann::json create(const ResourcePath& path, const nlohmann::json& object);
  // kApply: server-side apply as field_manager, forcing ownership of the fields it sets.
  nlohmann::json patch(const ResourcePath& path, const nlohmann::json& patch, PatchType type);
  nlohmann::json replace(const ResourcePath& path, const nlohmann::json& object);
  // propagation: "Background" (the default), "Foreground" or "Orphan".
  void remove(const ResourcePath& path, const std::string& propagation = "Background");
  // A delete with grace period 0, only of the object with this uid (a precondition): the API
  // server forgets it at once, without waiting for its node (kubectl delete --force).
  void force_remove(const ResourcePath& path, const std::string& uid);

  // Streams watch events after options.resource_version (with bookmarks) to `on_event` until
  // the server ends the watch (after about `timeout`), `on_event` returns false, or `stop` is
  // set. `on_event` may move from the event. Throws ApiError: 410 Gone when that version is too old
  // (relist and watch again).
  void watch(const ResourcePath& path, const ListOptions& options,
             const std::function<bool(WatchEvent&)>& on_event, const std::atomic<bool>& stop,
             std::chrono::seconds timeout = std::chrono::seconds(300));

  [[nodiscard]] const ClusterAccess& access() const { return access_; }

 private:
  class Http;
  nlohmann::json call(const std::string& method, const std::string& uri,
                      const std::string& content_type, const std::string& body);
  std::shared_ptr<Http> http();                     // the current connection pool
  void renew(const std::shared_ptr<Http>& broken);  // drops a pool whose connections failed

  ClusterAccess access_;
  std::string field_manager_;
  std::chrono::milliseconds timeout_;
  std::mutex http_mu_;
  std::shared_ptr<Http> http_;
};

}  // namespace cifar::kube
