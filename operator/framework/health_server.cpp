#include "framework/health_server.h"

#include <cpprest/http_listener.h>

namespace cifar::op {

class HealthServer::Listener {
 public:
  Listener(const std::string& address, std::function<bool()> ready)
      : listener_(utility::conversions::to_string_t(address)), ready_(std::move(ready)) {
    listener_.support(web::http::methods::GET, [this](const web::http::http_request& request) {
      const auto path = utility::conversions::to_utf8string(request.relative_uri().path());
      if (path == "/healthz") {
        request.reply(web::http::status_codes::OK, "ok");
      } else if (path == "/readyz") {
        const bool ok = ready_();
        request.reply(
            ok ? web::http::status_codes::OK : web::http::status_codes::ServiceUnavailable,
            ok ? "ok" : "caches not synced");
      } else {
        request.reply(web::http::status_codes::NotFound);
      }
    });
    listener_.open().wait();
  }
  ~Listener() {
    try {
      listener_.close().wait();
    } catch (const std::exception&) {  // NOLINT(bugprone-empty-catch): shutting down anyway
    }
  }
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;

 private:
  web::http::experimental::listener::http_listener listener_;
  std::function<bool()> ready_;
};

HealthServer::HealthServer(const std::string& address, std::function<bool()> ready)
    : listener_(std::make_unique<Listener>(address, std::move(ready))) {}

HealthServer::~HealthServer() = default;

}  // namespace cifar::op
