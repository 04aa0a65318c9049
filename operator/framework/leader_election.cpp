#include "framework/leader_election.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <random>
#include <thread>

#include "framework/sleep_until.h"

namespace cifar::op {
namespace {

using nlohmann::json;

int lease_seconds(std::chrono::milliseconds duration) {
  return std::max(1, static_cast<int>(std::ceil(static_cast<double>(duration.count()) / 1000.0)));
}

}  // namespace

std::optional<json> next_lease_spec(const std::optional<json>& current, bool expired,
                                    const ElectionConfig& config, const std::string& now) {
  if (!current) {
    return json{{"holderIdentity", config.identity},
                {"leaseDurationSeconds", lease_seconds(config.lease_duration)},
                {"acquireTime", now},
                {"renewTime", now},
                {"leaseTransitions", 0}};
  }
  const auto holder = current->value("holderIdentity", "");
  if (!holder.empty() && holder != config.identity && !expired) return std::nullopt;
  auto spec = *current;
  if (holder != config.identity) {  // a new holder: a transition
    spec["acquireTime"] = now;
    spec["leaseTransitions"] = current->value("leaseTransitions", 0) + 1;
  }
  spec["holderIdentity"] = config.identity;
  spec["leaseDurationSeconds"] = lease_seconds(config.lease_duration);
  spec["renewTime"] = now;
  return spec;
}

json released_lease_spec(const json& current, const std::string& now) {
  auto spec = current;
  spec["holderIdentity"] = "";
  spec["leaseDurationSeconds"] = 1;
  spec["acquireTime"] = now;
  spec["renewTime"] = now;
  return spec;
}

std::string default_identity() {
  std::array<char, 256> host{};
  if (gethostname(host.data(), host.size() - 1) != 0) host[0] = '\0';
  std::random_device random;
  return fmt::format("{}_{:08x}", host.data(), random());
}

LeaderElector::LeaderElector(kube::Client& client, ElectionConfig config)
    : client_(client), config_(std::move(config)) {}

bool LeaderElector::try_acquire_or_renew() {
  const auto path = kube::leases(config_.namespace_).named(config_.name);
  const auto now = format_micro_time(Clock::now());
  try {
    json lease;
    try {
      lease = client_.get(path);
    } catch (const kube::ApiError& e) {
      if (e.status() != 404) throw;
      const auto spec = *next_lease_spec(std::nullopt, false, config_, now);
      client_.create(kube::leases(config_.namespace_), {{"apiVersion", "coordination.k8s.io/v1"},
                                                        {"kind", "Lease"},
                                                        {"metadata", {{"name", config_.name}}},
                                                        {"spec", spec}});
      observed_spec_ = spec;
      observed_at_ = Steady::now();
      return true;
    }
    const auto spec = lease.value("spec", json::object());
    if (spec != observed_spec_) {
      observed_spec_ = spec;
      observed_at_ = Steady::now();
    }
    const auto expired =
        Steady::now() - observed_at_ >= std::chrono::seconds(spec.value("leaseDurationSeconds", 0));
    const auto next = next_lease_spec(spec, expired, config_, now);
    if (!next) return false;
    lease["spec"] = *next;
    client_.replace(path, lease);  // carries the resourceVersion read: 409 if anyone wrote since
    observed_spec_ = *next;
    observed_at_ = Steady::now();
    return true;
  } catch (const kube::ApiError& e) {
    if (e.status() == 409) return false;  // another candidate wrote first
    spdlog::warn("leader election: lease {}/{}: {}", config_.namespace_, config_.name, e.what());
    return false;
  } catch (const std::exception& e) {  // a malformed Lease: a failed round, not a crash
    spdlog::warn("leader election: lease {}/{}: {}", config_.namespace_, config_.name, e.what());
    return false;
  }
}

void LeaderElector::release() {
  const auto path = kube::leases(config_.namespace_).named(config_.name);
  try {
    auto lease = client_.get(path);
    if (lease["spec"].value("holderIdentity", "") != config_.identity) return;
    lease["spec"] = released_lease_spec(lease["spec"], format_micro_time(Clock::now()));
    client_.replace(path, lease);
    spdlog::info("leader election: released lease {}/{}", config_.namespace_, config_.name);
  } catch (const std::exception& e) {
    spdlog::warn(
        "leader election: could not release lease {}/{} (the next leader waits for it "
        "to expire): {}",
        config_.namespace_, config_.name, e.what());
  }
}

LeaderElector::Outcome LeaderElector::run(
    const std::atomic<bool>& stop,
    const std::function<void(const std::atomic<bool>& stop_leading)>& lead,
    const std::function<void(bool leading)>& on_state) {
  std::string reported_holder;
  while (!try_acquire_or_renew()) {
    const auto holder = observed_spec_.value("holderIdentity", "");
    if (holder != reported_holder) {
      spdlog::info("leader election: lease {}/{} is held by {}; standing by as {}",
                   config_.namespace_, config_.name, holder, config_.identity);
      reported_holder = holder;
    }
    on_state(false);
    sleep_until_or_stop(stop, Steady::now() + config_.retry_period);
    if (stop.load()) return Outcome::kStopped;
  }
  spdlog::info("leader election: {} acquired lease {}/{} (transition {})", config_.identity,
               config_.namespace_, config_.name, observed_spec_.value("leaseTransitions", 0));
  on_state(true);

  // The renewer keeps the Lease until lead() has returned (in-flight reconciles finish under
  // it), and stops leading when `stop` is set or the Lease is lost.
  std::atomic<bool> stop_leading{false};
  std::atomic<bool> lead_returned{false};
  std::atomic<bool> lost{false};
  std::thread renewer([&] {
    auto last_renewed = Steady::now();  // when the last successful round was sent
    auto next_round = last_renewed + config_.retry_period;
    while (!lead_returned.load()) {
      if (stop.load()) stop_leading = true;
      if (Steady::now() < next_round) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        continue;
      }
      const auto attempt = Steady::now();
      next_round = attempt + config_.retry_period;
      if (try_acquire_or_renew()) {
        last_renewed = attempt;
        continue;
      }
      const auto holder = observed_spec_.value("holderIdentity", "");
      if (holder != config_.identity) {
        spdlog::error("leader election: lease {}/{} was taken over by {}", config_.namespace_,
                      config_.name, holder);
      } else if (Steady::now() - last_renewed >= config_.renew_deadline) {
        spdlog::error("leader election: could not renew lease {}/{} for {} ms", config_.namespace_,
                      config_.name, config_.renew_deadline.count());
      } else {
        continue;
      }
      lost = true;
      stop_leading = true;
      break;
    }
  });
  try {
    lead(stop_leading);
  } catch (...) {
    lead_returned = true;
    renewer.join();
    throw;
  }
  lead_returned = true;
  renewer.join();
  on_state(false);
  if (lost.load()) return Outcome::kLostLease;
  release();
  return Outcome::kStopped;
}

}  // namespace cifar::op
