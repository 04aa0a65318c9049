#include "framework/informer.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#ifdef __GLIBC__
#include <malloc.h>  // malloc_trim
#endif

#include "framework/sleep_until.h"

namespace cifar::op {

using nlohmann::json;

namespace {

// A list's pages and parsed copies come and go in bursts of tens of megabytes at a fleet's
// scale; glibc keeps what is freed in its arenas, so the resident size would stay at the burst's
// peak (380 MB against a 110 MB cache at 9,000 pods: docs/BENCHMARKS.md, section 21).
void return_free_memory() {
#ifdef __GLIBC__
  malloc_trim(0);
#endif
}

}  // namespace

Informer::Informer(kube::Client& client, kube::ResourcePath path, kube::ListOptions selector,
                   Handler on_change, Transform transform, IndexFunc index)
    : client_(client),
      path_(std::move(path)),
      selector_(std::move(selector)),
      on_change_(std::move(on_change)),
      transform_(std::move(transform)),
      index_func_(std::move(index)) {}

void Informer::strip_managed_fields(json& object) {
  if (auto m = object.find("metadata"); m != object.end()) m->erase("managedFields");
}

void Informer::store(const std::string& key, json object) {
  if (index_func_) {
    if (const auto old = cache_.find(key); old != cache_.end()) {
      if (const auto value = index_func_(old->second); !value.empty()) index_[value].erase(key);
    }
    if (const auto value = index_func_(object); !value.empty()) index_[value].insert(key);
  }
  cache_[key] = std::move(object);
}

void Informer::erase(const std::string& key) {
  const auto old = cache_.find(key);
  if (old == cache_.end()) return;
  if (index_func_) {
    if (const auto value = index_func_(old->second); !value.empty()) {
      auto& keys = index_[value];
      keys.erase(key);
      if (keys.empty()) index_.erase(value);
    }
  }
  cache_.erase(old);
}

Informer::~Informer() { stop(); }

void Informer::start() {
  thread_ = std::thread([this] { run(); });
}

void Informer::stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

bool Informer::wait_for_sync(std::chrono::milliseconds timeout) const {
  const auto until = Steady::now() + timeout;
  while (!synced_.load()) {
    if (Steady::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

std::string Informer::key_of(const json& object) {
  const auto& m = object.at("metadata");
  return m.value("namespace", "") + "/" + m.at("name").get<std::string>();
}

Informer::KeyParts Informer::split_key(const std::string& key) {
  const auto slash = key.find('/');
  return {key.substr(0, slash), key.substr(slash + 1)};
}

std::optional<json> Informer::get(const std::string& key) const {
  const std::lock_guard lock(mu_);
  const auto it = cache_.find(key);
  if (it == cache_.end()) return std::nullopt;
  return it->second;
}

std::vector<json> Informer::list(const std::function<bool(const json&)>& filter) const {
  const std::lock_guard lock(mu_);
  std::vector<json> out;
  for (const auto& [key, object] : cache_) {
    if (filter(object)) out.push_back(object);
  }
  return out;
}

std::vector<json> Informer::indexed(const std::string& value) const {
  const std::lock_guard lock(mu_);
  std::vector<json> out;
  const auto keys = index_.find(value);
  if (keys == index_.end()) return out;
  for (const auto& key : keys->second) out.push_back(cache_.at(key));
  return out;
}

size_t Informer::size() const {
  const std::lock_guard lock(mu_);
  return cache_.size();
}

void Informer::for_each(const std::function<void(const json&)>& visit) const {
  const std::lock_guard lock(mu_);
  for (const auto& [key, object] : cache_) visit(object);
}

std::string Informer::relist() {
  // In pages, each trimmed before the next is read: one whole list of a fleet's pods is tens of
  // megabytes of JSON and several times that parsed (the chart's 256 Mi limit was crossed at
  // 5,700 pods: docs/BENCHMARKS.md, section 21).
  std::map<std::string, json> fresh;
  std::string version;
  kube::ListPage next{kListPageSize, ""};
  do {
    auto page = client_.list(path_, selector_, next);
    for (auto& item : page["items"]) {
      if (transform_) transform_(item);
      auto key = key_of(item);  // before the move: `a = b` evaluates b first in C++17
      fresh[std::move(key)] = std::move(item);
    }
    const auto& metadata = page["metadata"];
    version = metadata.value("resourceVersion", "");  // every page's is the first page's
    next.continue_token = metadata.value("continue", "");
  } while (!next.continue_token.empty());
  // What the handler is told of, without a copy of the cache (at the first list that is every
  // object): the keys of the new and changed objects, read from the cache once it holds them, and
  // the deleted objects themselves. This thread alone writes the cache, so its objects stay put.
  std::vector<json> deleted;
  std::vector<std::string> changed;
  {
    const std::lock_guard lock(mu_);
    for (auto& [key, object] : cache_) {
      if (fresh.count(key) == 0) deleted.push_back(std::move(object));  // while we did not watch
    }
    for (const auto& [key, object] : fresh) {
      const auto old = cache_.find(key);
      if (old == cache_.end() || old->second != object) changed.push_back(key);
    }
    cache_.clear();
    index_.clear();
    for (auto& [key, object] : fresh) store(key, std::move(object));
  }
  fresh.clear();
  relists_ += 1;
  synced_ = true;
  for (const auto& object : deleted) on_change_(object);
  deleted.clear();
  for (const auto& key : changed) on_change_(cache_.at(key));
  changed.clear();
  return_free_memory();
  // A watch without a version starts "now" and would miss what changed since the list.
  if (version.empty())
    throw std::runtime_error("the list of " + path_.str() + " has no resourceVersion");
  return version;
}

void Informer::run() {
  auto backoff = std::chrono::milliseconds(100);
  while (!stop_.load()) {
    try {
      auto options = selector_;
      options.resource_version = relist();
      backoff = std::chrono::milliseconds(100);
      // Watch until the server ends it, then go on from the last version seen.
      while (!stop_.load()) {
        client_.watch(
            path_, options,
            [&](kube::WatchEvent& event) {
              options.resource_version =
                  event.object["metadata"].value("resourceVersion", options.resource_version);
              if (event.type == "BOOKMARK") return true;
              auto object = std::move(event.object);
              if (transform_) transform_(object);
              const auto key = key_of(object);
              {
                const std::lock_guard lock(mu_);
                if (event.type == "DELETED") {
                  erase(key);
                } else {
                  store(key, object);
                }
              }
              on_change_(object);
              return true;
            },
            stop_, std::chrono::seconds(240));
      }
    } catch (const kube::ApiError& e) {
      if (stop_.load()) return;
      if (e.status() == 410) {
        spdlog::info("watch of {}: resource version too old, listing again", path_.str());
      } else {
        spdlog::warn("watch of {} failed, listing again in {} ms: {}", path_.str(), backoff.count(),
                     e.what());
      }
    } catch (const std::exception& e) {
      if (stop_.load()) return;
      spdlog::warn("watch of {} failed, listing again in {} ms: {}", path_.str(), backoff.count(),
                   e.what());
    }
    sleep_until_or_stop(stop_, Steady::now() + backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(10000));
  }
}

}  // namespace cifar::op
