#include "framework/http_probe.h"

#include <cpprest/http_client.h>

#include <exception>

namespace cifar::op {

ProbeResult probe_http(const std::string& url, std::chrono::seconds timeout) {
  try {
    web::http::client::http_client_config config;
    config.set_timeout(timeout);
    web::http::client::http_client client(url, config);
    const auto response = client.request(web::http::methods::GET).get();
    const auto body = response.extract_string().get();
    const auto code = response.status_code();
    const bool ok = code >= 200 && code < 300;
    return {ok, std::to_string(code) + " " + response.reason_phrase() + ", " +
                    std::to_string(body.size()) + " bytes"};
  } catch (const std::exception& e) {
    return {false, e.what()};
  }
}

}  // namespace cifar::op
