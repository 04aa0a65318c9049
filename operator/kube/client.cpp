#include "kube/client.h"

#include <cpprest/containerstream.h>
#include <cpprest/http_client.h>
#include <openssl/crypto.h>

#include <boost/asio/ssl.hpp>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace cifar::kube {
namespace {

using nlohmann::json;
namespace http = web::http;

std::string encode(const std::string& value) {
  return utility::conversions::to_utf8string(
      web::uri::encode_data_string(utility::conversions::to_string_t(value)));
}

// cpprest tears a cancelled connection down on its thread pool, which it joins at exit, after
// OpenSSL's own exit handler has cleaned up: freeing that connection's TLS state then waits for
// ever on a lock OpenSSL has torn down (a process that had stopped a watch hung at exit, 1 run in
// ~100 under load). So OpenSSL is told, before its first use, to leave its cleanup to the OS.
void keep_openssl_until_exit() {
  static const bool kept = OPENSSL_init_crypto(OPENSSL_INIT_NO_ATEXIT, nullptr) == 1;
  (void)kept;
}

http::client::http_client_config make_config(const ClusterAccess& access,
                                             std::chrono::milliseconds timeout) {
  keep_openssl_until_exit();  // every client is made from a config, before any TLS
  http::client::http_client_config config;
  config.set_timeout(timeout);
  config.set_validate_certificates(!access.insecure_skip_tls_verify);
  config.set_ssl_context_callback([access](boost::asio::ssl::context& context) {
    if (access.ca_pem.empty()) {
      context.set_default_verify_paths();
    } else {
      context.add_certificate_authority(boost::asio::buffer(access.ca_pem));
    }
    if (!access.client_cert_pem.empty()) {
      context.use_certificate_chain(boost::asio::buffer(access.client_cert_pem));
      context.use_private_key(boost::asio::buffer(access.client_key_pem),
                              boost::asio::ssl::context::pem);
    }
  });
  return config;
}

// `user_agent` (the client's field manager) names the client in the API server's audit log and
// its per-client views, as client-go's binary name does.
http::http_request make_request(const std::string& method, const std::string& uri,
                                const ClusterAccess& access, const std::string& user_agent) {
  http::http_request request(utility::conversions::to_string_t(method));
  request.set_request_uri(utility::conversions::to_string_t(uri));
  request.headers().add(U("Accept"), U("application/json"));
  request.headers().add(U("User-Agent"), utility::conversions::to_string_t(user_agent));
  if (!access.bearer_token.empty()) {
    request.headers().add(U("Authorization"),
                          utility::conversions::to_string_t("Bearer " + access.bearer_token));
  }
  return request;
}

// The server's Status object as an ApiError.
ApiError api_error(const std::string& what, int status, const std::string& body) {
  std::string reason = "Status" + std::to_string(status);
  std::string message = body;
  const auto parsed = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_object()) {
    reason = parsed.value("reason", reason);
    message = parsed.value("message", message);
  }
  return {status, reason, what + ": " + std::to_string(status) + " " + reason + ": " + message};
}

std::string query(const ListOptions& options, bool watch, std::chrono::seconds timeout) {
  std::string q;
  auto add = [&q](const std::string& key, const std::string& value) {
    q += (q.empty() ? "?" : "&") + key + "=" + encode(value);
  };
  if (!options.label_selector.empty()) add("labelSelector", options.label_selector);
  if (!options.field_selector.empty()) add("fieldSelector", options.field_selector);
  if (!options.resource_version.empty()) add("resourceVersion", options.resource_version);
  if (watch) {
    add("watch", "1");
    add("allowWatchBookmarks", "true");
    add("timeoutSeconds", std::to_string(timeout.count()));
  }
  return q;
}

}  // namespace

ResourcePath ResourcePath::named(const std::string& object_name) const {
  auto p = *this;
  p.name = object_name;
  return p;
}

ResourcePath ResourcePath::in(const std::string& ns) const {
  auto p = *this;
  p.namespace_ = ns;
  return p;
}

ResourcePath ResourcePath::sub(const std::string& subresource_name) const {
  auto p = *this;
  p.subresource = subresource_name;
  return p;
}

std::string ResourcePath::str() const {
  std::string s = group.empty() ? "/api/" + version : "/apis/" + group + "/" + version;
  if (!namespace_.empty()) s += "/namespaces/" + namespace_;
  s += "/" + plural;
  if (!name.empty()) s += "/" + name;
  if (!subresource.empty()) s += "/" + subresource;
  return s;
}

ResourcePath pods(const std::string& ns) { return {"", "v1", "pods", ns, "", ""}; }
ResourcePath services(const std::string& ns) { return {"", "v1", "services", ns, "", ""}; }
ResourcePath secrets(const std::string& ns) { return {"", "v1", "secrets", ns, "", ""}; }
ResourcePath network_policies(const std::string& ns) {
  return {"networking.k8s.io", "v1", "networkpolicies", ns, "", ""};
}
ResourcePath events(const std::string& ns) { return {"", "v1", "events", ns, "", ""}; }
ResourcePath nodes() { return {"", "v1", "nodes", "", "", ""}; }
ResourcePath leases(const std::string& ns) {
  return {"coordination.k8s.io", "v1", "leases", ns, "", ""};
}

class Client::Http {
 public:
  Http(const ClusterAccess& access, std::chrono::milliseconds timeout)
      : client(utility::conversions::to_string_t(access.server), make_config(access, timeout)) {}
  http::client::http_client client;
};

Client::Client(ClusterAccess access, std::string field_manager, std::chrono::milliseconds timeout)
    : access_(std::move(access)),
      field_manager_(std::move(field_manager)),
      timeout_(timeout),
      http_(std::make_shared<Http>(access_, timeout_)) {}

Client::~Client() = default;

json Client::call(const std::string& method, const std::string& uri,
                  const std::string& content_type, const std::string& body) {
  const auto what = method + " " + uri;
  // Twice at most: keep-alive connections to an apiserver that has since restarted fail at
  // once, so the pool is dropped and the second attempt connects anew. (A create whose first
  // attempt did reach the server gets 409 AlreadyExists, which callers treat as done.)
  for (int attempt = 1;; ++attempt) {
    auto request = make_request(method, uri, access_, field_manager_);
    if (!body.empty()) request.set_body(body, content_type);
    const auto pool = http();
    try {
      auto response = pool->client.request(request).get();
      const auto text = response.extract_utf8string(true).get();
      if (response.status_code() >= 400) throw api_error(what, response.status_code(), text);
      return text.empty() ? json() : json::parse(text);
    } catch (const http::http_exception& e) {
      renew(pool);
      if (attempt < 2) continue;
      throw ApiError(0, "Unreachable",
                     what + ": " + access_.server + " did not answer: " + e.what());
    }
  }
}

std::shared_ptr<Client::Http> Client::http() {
  const std::lock_guard lock(http_mu_);
  return http_;
}

void Client::renew(const std::shared_ptr<Http>& broken) {
  const std::lock_guard lock(http_mu_);
  if (http_ == broken) http_ = std::make_shared<Http>(access_, timeout_);
}

json Client::get(const ResourcePath& path) { return call("GET", path.str(), "", ""); }

json Client::list(const ResourcePath& path, const ListOptions& options, const ListPage& page) {
  auto uri = path.str() + query(options, false, {});
  const char* separator = uri.find('?') == std::string::npos ? "?" : "&";
  if (page.limit > 0) {
    uri += separator + std::string("limit=") + std::to_string(page.limit);
    separator = "&";
  }
  if (!page.continue_token.empty())
    uri += separator + std::string("continue=") + encode(page.continue_token);
  return call("GET", uri, "", "");
}

json Client::create(const ResourcePath& path, const json& object) {
  return call("POST", path.str(), "application/json", object.dump());
}

json Client::replace(const ResourcePath& path, const json& object) {
  return call("PUT", path.str(), "application/json", object.dump());
}

json Client::patch(const ResourcePath& path, const json& patch, PatchType type) {
  if (type == PatchType::kMerge) {
    return call("PATCH", path.str(), "application/merge-patch+json", patch.dump());
  }
  if (type == PatchType::kStrategicMerge) {
    return call("PATCH", path.str(), "application/strategic-merge-patch+json", patch.dump());
  }
  return call("PATCH", path.str() + "?fieldManager=" + encode(field_manager_) + "&force=true",
              "application/apply-patch+yaml", patch.dump());  // JSON is YAML
}

void Client::remove(const ResourcePath& path, const std::string& propagation) {
  const json options = {
      {"kind", "DeleteOptions"}, {"apiVersion", "v1"}, {"propagationPolicy", propagation}};
  call("DELETE", path.str(), "application/json", options.dump());
}

void Client::force_remove(const ResourcePath& path, const std::string& uid) {
  json options = {{"kind", "DeleteOptions"},
                  {"apiVersion", "v1"},
                  {"propagationPolicy", "Background"},
                  {"gracePeriodSeconds", 0}};
  if (!uid.empty()) options["preconditions"] = {{"uid", uid}};
  call("DELETE", path.str(), "application/json", options.dump());
}

void Client::watch(const ResourcePath& path, const ListOptions& options,
                   const std::function<bool(WatchEvent&)>& on_event, const std::atomic<bool>& stop,
                   std::chrono::seconds timeout) {
  const auto uri = path.str() + query(options, true, timeout);
  const auto what = "WATCH " + uri;
  // Its own client: a watch outlives the usual request timeout.
  http::client::http_client client(utility::conversions::to_string_t(access_.server),
                                   make_config(access_, timeout + std::chrono::seconds(30)));
  pplx::cancellation_token_source cancel;
  // However the watch ends, its connection is closed rather than left buffering until the
  // server's timeout.
  struct CancelOnExit {
    pplx::cancellation_token_source& source;
    ~CancelOnExit() { source.cancel(); }
  } cancel_on_exit{cancel};
  // Waits for `task` unless `stop` is set first (then the request is cancelled). Woken by the
  // task's continuation, not by polling: a watch delivers events as fast as they are read.
  auto wait = [&](auto& task) {
    struct Done {
      std::mutex mu;
      std::condition_variable cv;
      bool done = false;
    };
    auto done = std::make_shared<Done>();
    task.then([done](const std::decay_t<decltype(task)>&) {  // task-based: runs even on failure
      const std::lock_guard lock(done->mu);
      done->done = true;
      done->cv.notify_all();
    });
    std::unique_lock lock(done->mu);
    while (!done->done) {
      if (stop.load()) {
        lock.unlock();
        cancel.cancel();
        try {
          task.wait();   // observed, or pplx aborts the process over an unobserved exception
        } catch (...) {  // NOLINT(bugprone-empty-catch): cancelled on purpose
        }
        return false;
      }
      done->cv.wait_for(lock, std::chrono::milliseconds(50));
    }
    return true;
  };
  try {
    auto request =
        client.request(make_request("GET", uri, access_, field_manager_), cancel.get_token());
    if (!wait(request)) return;
    auto response = request.get();
    if (response.status_code() >= 400) {
      throw api_error(what, response.status_code(), response.extract_utf8string(true).get());
    }
    // Read whatever has arrived and split it into lines here: cpprest's read_line
    // goes a character at a time through task continuations (a thread hop per character).
    auto body = response.body().streambuf();
    std::vector<uint8_t> chunk(size_t{64} * 1024);
    std::string pending;  // bytes after the last complete line
    while (true) {
      // What has arrived, or else one byte: getn waits until it has all it was asked for.
      const auto available = std::min(chunk.size(), body.in_avail());
      auto read = body.getn(chunk.data(), std::max<size_t>(available, 1));
      if (!wait(read)) return;
      const auto n = read.get();
      if (n == 0) return;  // the server ended the watch
      pending.append(chunk.begin(), chunk.begin() + static_cast<std::ptrdiff_t>(n));
      size_t start = 0;
      for (auto end = pending.find('\n'); end != std::string::npos;
           start = end + 1, end = pending.find('\n', start)) {
        if (end == start) continue;
        auto event = json::parse(pending.begin() + static_cast<std::ptrdiff_t>(start),
                                 pending.begin() + static_cast<std::ptrdiff_t>(end));
        WatchEvent e{event.value("type", ""), std::move(event["object"])};
        if (e.type == "ERROR") {
          const int code = e.object.value("code", 500);
          throw ApiError(code, e.object.value("reason", "Error"),
                         what + ": " + std::to_string(code) + " " +
                             e.object.value("message", e.object.dump()));
        }
        if (!on_event(e)) return;
      }
      pending.erase(0, start);
    }
  } catch (const http::http_exception& e) {
    if (stop.load()) return;
    throw ApiError(0, "Unreachable", what + ": " + e.what());
  } catch (const pplx::task_canceled&) {
    return;
  }
}

}  // namespace cifar::kube
