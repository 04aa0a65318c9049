// A one-shot HTTP check, for images without a shell or curl: `cifar-operator --probe URL` is what
// the Helm chart's `helm test` pod runs against the operator's Service.
#pragma once

#include <chrono>
#include <string>

namespace cifar::op {

struct ProbeResult {
  bool ok = false;     // a 2xx answer came
  std::string detail;  // "200 OK, 2314 bytes" or why it failed
};

// GET `url`; a connection error, a timeout or a non-2xx status is a failure.
ProbeResult probe_http(const std::string& url, std::chrono::seconds timeout);

}  // namespace cifar::op
