// What this controller has created or deleted that its cache does not show yet (client-go's
// ControllerExpectations). A job is not reconciled again until its pod cache has caught up with
// its own writes: reconciling from a cache that lags would create the same pods again (409s) and
// count a deleted pod's restart twice. An expectation that no watch event fulfils expires, so a
// lost event delays a job by at most the expiry, never stalls it.
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "framework/clock.h"

namespace cifar::op {

class Expectations {
 public:
  explicit Expectations(std::chrono::seconds expiry = std::chrono::seconds(30)) : expiry_(expiry) {}

  void expect_created(const std::string& job_key, const std::string& pod_name);
  void expect_deleted(const std::string& job_key, const std::string& pod_uid);

  // Given the job's pods as the cache shows them, drops the expectations they fulfil (a created
  // pod is there; a deleted one is gone or terminating). Returns nullopt when none is left, else
  // how long until the rest expire: reconcile then, unless their watch events come first.
  std::optional<std::chrono::milliseconds> pending(const std::string& job_key,
                                                   const std::vector<nlohmann::json>& pods,
                                                   Steady::time_point now = Steady::now());
  void forget(const std::string& job_key);  // the job is gone

 private:
  struct Pending {
    std::set<std::string> created;  // pod names
    std::set<std::string> deleted;  // pod uids
    Steady::time_point since;       // the latest expectation
  };
  std::chrono::seconds expiry_;
  std::mutex mu_;
  std::map<std::string, Pending> jobs_;
};

}  // namespace cifar::op
