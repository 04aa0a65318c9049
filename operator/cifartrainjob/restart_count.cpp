#include "cifartrainjob/restart_count.h"

#include <algorithm>
#include <numeric>

#include "cifartrainjob/desired_state.h"
#include "contract/exit_codes.h"
#include "framework/pod_status.h"

namespace cifar::op {
namespace {

// A status written before podRestarts existed counted recreations only, in status.restarts: they
// are kept under a key of their own.
constexpr const char* kEarlierRestarts = "earlier";

std::map<std::string, int64_t>& charges_of(JobStatus& status) {
  if (!status.pod_restarts) {
    auto& charges = status.pod_restarts.emplace();
    if (status.restarts.value_or(0) > 0) charges[kEarlierRestarts] = *status.restarts;
  }
  return *status.pod_restarts;
}

// A pod's key: its UID (a pod recreated under its name is another pod), else its name.
std::string key_of(const nlohmann::json& pod) {
  const auto& metadata = pod["metadata"];
  const auto uid = metadata.value("uid", "");
  return uid.empty() ? metadata.value("name", "") : uid;
}

void raise_charge(const nlohmann::json& pod, int64_t restarts, JobStatus& status) {
  auto& charges = charges_of(status);
  if (restarts > 0) {
    auto& charged = charges[key_of(pod)];
    charged = std::max(charged, restarts);
  }
}

// status.restarts: the sum of the charges.
int64_t settle(JobStatus& status) {
  const auto& charges = charges_of(status);
  status.restarts =
      std::accumulate(charges.begin(), charges.end(), int64_t{0},
                      [](int64_t sum, const auto& entry) { return sum + entry.second; });
  return *status.restarts;
}

}  // namespace

int64_t chargeable_restarts(const nlohmann::json& pod) {
  const int64_t restarts = pod_restarts(pod);
  const auto before = pod_exit_code_before_restart(pod);
  const bool after_refusal = before && contract::is_refusal(*before);
  return after_refusal && restarts > 0 ? restarts - 1 : restarts;
}

int64_t count_restarts(const PodsByName& pods, JobStatus& status) {
  for (const auto& [name, pod] : pods) {
    // An elastic job's rendezvous store restarts as a server does: the job's trainers ride it out.
    if (is_rendezvous_store(pod)) continue;
    raise_charge(pod, chargeable_restarts(pod), status);
  }
  return settle(status);
}

int64_t charge_recreation(const nlohmann::json& pod, JobStatus& status) {
  raise_charge(pod, pod_restarts(pod) + 1, status);
  return settle(status);
}

}  // namespace cifar::op
