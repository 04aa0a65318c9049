// The apply layer: carries out a Plan (plan.h) through the API. Creates first (the token Secret
// with a random token, the NetworkPolicy, the Service, the pods; one of the job's own already
// there counts as created: names are deterministic, so a restarted operator never duplicates),
// then the status as a merge patch guarded by the resourceVersion it was computed from, then the
// deletes (one already gone counts as deleted), Kueue's finalizers, the Workload of an ended
// admission, the Events, and the job itself once its TTL passed. The pods it creates and deletes
// are recorded as expectations (expectations.h) for the next round to wait for.
#pragma once

#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <string_view>

#include "api/job.h"
#include "api/status.h"
#include "cifartrainjob/operator_metrics.h"
#include "cifartrainjob/plan.h"
#include "framework/expectations.h"
#include "kube/client.h"

namespace cifar::op {

// A create that could not be made now and is tried again later: refused for now by the server
// (reason FailedCreate) or blocked by an object of its name the job does not control (NotOwned).
// Applier::apply stops creating and says so with this.
class CreateBlocked : public std::runtime_error {
 public:
  CreateBlocked(std::string_view reason, const std::string& message)
      : std::runtime_error(message), reason_(reason) {}
  [[nodiscard]] std::string_view reason() const { return reason_; }
  // How soon the job tries again: a quota frees up by itself; a foreign object needs a person.
  [[nodiscard]] std::chrono::seconds retry_after() const {
    return std::chrono::seconds(reason_ == reason::kFailedCreate ? 10 : 30);
  }
  // Pods the round created before it was stopped: none means the incarnation it took for them
  // was given to no pod, and is not spent.
  [[nodiscard]] int pods_created() const { return pods_created_; }
  void set_pods_created(int n) { pods_created_ = n; }

 private:
  std::string_view reason_;
  int pods_created_ = 0;
};

// A refusal that no retry can change: a 4xx other than conflict (a stale read) and throttling.
bool is_permanent_refusal(const kube::ApiError& e);

class Applier {
 public:
  Applier(kube::Client& client, Expectations& expectations, OperatorMetrics& metrics);

  // The whole plan for `job`, read as `object`. `pod_uids`: the uids of the pods the plan was
  // computed from, by name. Throws CreateBlocked where a create is refused for now or blocked.
  void apply(const nlohmann::json& object, const Job& job, const Plan& plan,
             const std::map<std::string, std::string>& pod_uids);
  // All of the plan but its creates: the status, the deletes, Kueue's finalizers, the Workload,
  // the Events and the job's deletion.
  void update_status_and_delete(const nlohmann::json& object, const Job& job, const Plan& plan,
                                const std::map<std::string, std::string>& pod_uids);

 private:
  // Counts the pods it created in `created`, also when it throws.
  void create_objects(const Job& job, const Plan& plan, int& created);
  void record_event(const nlohmann::json& object, const EventRecord& event);

  kube::Client& client_;
  Expectations& expectations_;
  OperatorMetrics& metrics_;
};

}  // namespace cifar::op
