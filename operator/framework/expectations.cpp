#include "framework/expectations.h"

#include "framework/pod_status.h"

namespace cifar::op {

void Expectations::expect_created(const std::string& job_key, const std::string& pod_name) {
  const std::lock_guard lock(mu_);
  auto& job = jobs_[job_key];
  job.created.insert(pod_name);
  job.since = Steady::now();
}

void Expectations::expect_deleted(const std::string& job_key, const std::string& pod_uid) {
  const std::lock_guard lock(mu_);
  auto& job = jobs_[job_key];
  job.deleted.insert(pod_uid);
  job.since = Steady::now();
}

std::optional<std::chrono::milliseconds> Expectations::pending(
    const std::string& job_key, const std::vector<nlohmann::json>& pods, Steady::time_point now) {
  const std::lock_guard lock(mu_);
  const auto found = jobs_.find(job_key);
  if (found == jobs_.end()) return std::nullopt;
  auto& job = found->second;
  std::set<std::string> still_there;  // uids of pods the cache shows alive
  for (const auto& pod : pods) {
    const auto& m = pod["metadata"];
    job.created.erase(m.value("name", ""));
    if (!pod_terminating(pod)) still_there.insert(m.value("uid", ""));
  }
  for (auto uid = job.deleted.begin(); uid != job.deleted.end();) {
    uid = still_there.count(*uid) != 0 ? std::next(uid) : job.deleted.erase(uid);
  }
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(job.since + expiry_ - now);
  if ((job.created.empty() && job.deleted.empty()) || left.count() <= 0) {
    jobs_.erase(found);
    return std::nullopt;
  }
  return left;
}

void Expectations::forget(const std::string& job_key) {
  const std::lock_guard lock(mu_);
  jobs_.erase(job_key);
}

}  // namespace cifar::op
