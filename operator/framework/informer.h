// An informer: a local cache of one resource type kept current by list-then-watch, as
// client-go's. It lists, watches from the list's resourceVersion (following bookmarks), and on
// 410 Gone or any failure lists again after a backoff, so a watch broken by an apiserver restart
// recovers by itself. Every added, changed or deleted object is passed to the handler.
// As client-go's: a transform trims objects before they are cached (managedFields, fields the
// controller never reads), and an index finds the objects of one owner without a scan.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "kube/client.h"

namespace cifar::op {

class Informer {
 public:
  using Handler = std::function<void(const nlohmann::json& object)>;
  using Transform = std::function<void(nlohmann::json& object)>;
  // The index value of an object ("" for none), e.g. "namespace/job" for a job's pods.
  using IndexFunc = std::function<std::string(const nlohmann::json& object)>;

  Informer(kube::Client& client, kube::ResourcePath path, kube::ListOptions selector,
           Handler on_change, Transform transform = strip_managed_fields,
           IndexFunc index = nullptr);
  ~Informer();
  Informer(const Informer&) = delete;
  Informer& operator=(const Informer&) = delete;

  void start();
  void stop();
  // True once the first list is in the cache.
  bool wait_for_sync(std::chrono::milliseconds timeout) const;
  [[nodiscard]] bool synced() const { return synced_.load(); }

  // "namespace/name" of an object, and back.
  static std::string key_of(const nlohmann::json& object);
  struct KeyParts {
    std::string namespace_;
    std::string name;
  };
  static KeyParts split_key(const std::string& key);
  [[nodiscard]] std::optional<nlohmann::json> get(const std::string& key) const;
  [[nodiscard]] std::vector<nlohmann::json> list(
      const std::function<bool(const nlohmann::json&)>& filter) const;
  [[nodiscard]] size_t size() const;
  // The objects whose index value is `value`.
  [[nodiscard]] std::vector<nlohmann::json> indexed(const std::string& value) const;
  // Visits every cached object under the cache's lock, without copying: `visit` must be quick.
  void for_each(const std::function<void(const nlohmann::json&)>& visit) const;

  // The default transform: metadata.managedFields is most of an object's size and never read.
  static void strip_managed_fields(nlohmann::json& object);
  [[nodiscard]] int64_t relists() const { return relists_.load(); }

 private:
  void run();
  std::string relist();                          // returns the list's resourceVersion
  static constexpr int64_t kListPageSize = 500;  // client-go's reflector pages alike
  // Cache updates, with the index kept in step; the caller holds mu_.
  void store(const std::string& key, nlohmann::json object);
  void erase(const std::string& key);

  kube::Client& client_;
  kube::ResourcePath path_;
  kube::ListOptions selector_;
  Handler on_change_;
  Transform transform_;
  IndexFunc index_func_;
  mutable std::mutex mu_;
  std::map<std::string, nlohmann::json> cache_;
  std::map<std::string, std::set<std::string>> index_;  // index value -> keys
  std::atomic<bool> stop_{false};
  std::atomic<bool> synced_{false};
  std::atomic<int64_t> relists_{0};
  std::thread thread_;
};

}  // namespace cifar::op
