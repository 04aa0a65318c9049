// Leader election on a coordination.k8s.io/v1 Lease, as client-go's leaderelection does it: of
// several operator replicas one holds the Lease and reconciles; the others retry and take over
// once the holder has not renewed it for a lease duration. Expiry is judged by when *this*
// process last saw the record change, never by the holder's clock (no clock-skew assumptions);
// writes carry the resourceVersion read, so two candidates can never both win one round.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "framework/clock.h"
#include "kube/client.h"

namespace cifar::op {

struct ElectionConfig {
  std::string namespace_;
  std::string name = "cifar-operator";
  std::string identity;                             // unique per process: "<hostname>_<random>"
  std::chrono::milliseconds lease_duration{15000};  // a silent holder loses the Lease after this
  std::chrono::milliseconds renew_deadline{
      10000};  // a leader that cannot renew for this long quits
  std::chrono::milliseconds retry_period{2000};
};

// The pure decision of one acquire-or-renew round: the Lease spec to write, or nullopt when
// another holder's Lease is still live. `current`: the spec read (nullopt: there is no Lease);
// `expired`: whether that record has gone unchanged for a lease duration as this process saw it.
// `now`: a MicroTime string ("2026-11-22T10:00:00.000000Z").
std::optional<nlohmann::json> next_lease_spec(const std::optional<nlohmann::json>& current,
                                              bool expired, const ElectionConfig& config,
                                              const std::string& now);

// A spec that hands the Lease back on a graceful exit: no holder, so a standby need not wait a
// lease duration (client-go's ReleaseOnCancel).
nlohmann::json released_lease_spec(const nlohmann::json& current, const std::string& now);

// "<hostname>_<8 random hex digits>": the pod name in a cluster, unique among local processes.
std::string default_identity();

class LeaderElector {
 public:
  enum class Outcome { kStopped, kLostLease };

  LeaderElector(kube::Client& client, ElectionConfig config);

  // Waits until this process holds the Lease (or `stop`), then calls lead(stop_leading) on this
  // thread while a second thread renews until lead() returns. stop_leading is set when `stop` is
  // set or the Lease could not be renewed within renew_deadline; lead() must return soon after.
  // A graceful stop releases the Lease. `on_state(leading)` reports the transitions. `client`
  // should time out well within renew_deadline (a renewal blocked past it would let a standby
  // take over while this process still leads).
  Outcome run(const std::atomic<bool>& stop,
              const std::function<void(const std::atomic<bool>& stop_leading)>& lead,
              const std::function<void(bool leading)>& on_state);

  // One round: true when this process holds the Lease afterwards. Exposed for tests.
  bool try_acquire_or_renew();
  void release();

 private:
  kube::Client& client_;
  ElectionConfig config_;
  // The record as last read (empty until a read succeeds: the API may not answer at first),
  // and when it last changed.
  nlohmann::json observed_spec_ = nlohmann::json::object();
  Steady::time_point observed_at_;
};

}  // namespace cifar::op
