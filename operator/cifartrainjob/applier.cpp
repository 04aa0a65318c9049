#include "cifartrainjob/applier.h"

#include <spdlog/spdlog.h>
#include <sys/random.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <iomanip>
#include <sstream>

#include "cifartrainjob/desired_state.h"
#include "cifartrainjob/resource.h"
#include "framework/kueue.h"
#include "framework/merge_patch.h"
#include "framework/owner.h"
#include "security/tls_dir.h"

namespace cifar::op {
namespace {

using nlohmann::json;

// The job's token: 32 bytes from the kernel's CSPRNG (getrandom(2); std::random_device may use
// the CPU's RDRAND instead), hex.
std::string random_token() {
  std::array<unsigned char, 32> bytes{};
  size_t filled = 0;
  while (filled < bytes.size()) {
    const auto n = ::getrandom(bytes.data() + filled, bytes.size() - filled, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error(std::string("getrandom: ") + std::strerror(errno));
    }
    filled += static_cast<size_t>(n);
  }
  std::ostringstream hex;
  for (const auto b : bytes) hex << std::hex << std::setw(2) << std::setfill('0') << int{b};
  return hex.str();
}

// A refusal that is no fault of the job and goes away by itself: the namespace's quota is
// exhausted for now, or its service account is not made yet (right after the namespace). The
// Job controller retries these too (its FailedCreate).
bool is_refused_for_now(const kube::ApiError& e) {
  const std::string what = e.what();
  return e.status() == 403 && (what.find("exceeded quota") != std::string::npos ||
                               what.find("error looking up service account") != std::string::npos);
}

// Creates `object` for `job`; false if it was there already. One of its name already there is
// the job's if the job controls it (our cache lagged our own create); anything else of that name
// is never used as the job's (CreateBlocked).
bool create_owned(kube::Client& client, const kube::ResourcePath& path, const json& object,
                  const Job& job) {
  try {
    client.create(path, object);
    return true;
  } catch (const kube::ApiError& e) {
    if (e.status() != 409) throw;
    const auto name = object["metadata"]["name"].get<std::string>();
    json existing;
    try {
      existing = client.get(path.named(name));
    } catch (const kube::ApiError& gone) {
      if (gone.status() == 404) throw e;  // deleted meanwhile: a conflict, tried again
      throw;
    }
    if (controlled_by(existing, job.uid)) return false;
    throw CreateBlocked(reason::kNotOwned,
                        object.value("kind", "object") + " " + name +
                            " exists and is not managed by this job (its controller: " +
                            describe_controller(existing) +
                            "); delete it, or give the job another name");
  }
}

}  // namespace

bool is_permanent_refusal(const kube::ApiError& e) {
  return e.status() >= 400 && e.status() < 500 && e.status() != 409 && e.status() != 429;
}

Applier::Applier(kube::Client& client, Expectations& expectations, OperatorMetrics& metrics)
    : client_(client), expectations_(expectations), metrics_(metrics) {}

void Applier::apply(const json& object, const Job& job, const Plan& plan,
                    const std::map<std::string, std::string>& pod_uids) {
  int created = 0;
  try {
    create_objects(job, plan, created);
  } catch (CreateBlocked& blocked) {
    blocked.set_pods_created(created);
    throw;
  } catch (const kube::ApiError& e) {
    if (!is_refused_for_now(e)) throw;
    CreateBlocked blocked(reason::kFailedCreate,
                          std::string("the API server refuses for now to create an object of the "
                                      "job, retrying: ") +
                              e.what());
    blocked.set_pods_created(created);
    throw blocked;
  }
  update_status_and_delete(object, job, plan, pod_uids);
}

void Applier::create_objects(const Job& job, const Plan& plan, int& created) {
  const auto key = job.namespace_ + "/" + job.name;
  if (plan.create_token_secret) {
    create_owned(client_, kube::secrets(job.namespace_),
                 desired_token_secret(job, random_token(),
                                      security::make_job_identities(job_certificate_request(job))),
                 job);
  }
  if (plan.create_network_policy) {
    create_owned(client_, kube::network_policies(job.namespace_), *plan.create_network_policy, job);
  }
  if (plan.create_service) {
    create_owned(client_, kube::services(job.namespace_), *plan.create_service, job);
    spdlog::info("{}: created Service {}, its token Secret and NetworkPolicy", key, job.name);
  }
  created = 0;
  for (const auto& pod : plan.create_pods) {
    const auto name = pod["metadata"]["name"].get<std::string>();
    try {
      if (create_owned(client_, kube::pods(job.namespace_), pod, job)) {
        ++created;
        spdlog::info("{}: created pod {}", key, name);
      }
    } catch (...) {
      metrics_.add_pods_created(created);
      throw;
    }
    expectations_.expect_created(key, name);
  }
  metrics_.add_pods_created(created);
}

void Applier::update_status_and_delete(const json& object, const Job& job, const Plan& plan,
                                       const std::map<std::string, std::string>& pod_uids) {
  const auto key = job.namespace_ + "/" + job.name;
  // The status first: a restart is counted before the failed pod that shows it is deleted, and a
  // status refused as stale (409) leaves the pods as they were for the retry.
  const auto old_status = object.value("status", json::object());
  const json new_status = plan.status;
  if (new_status != old_status) {
    // With the resourceVersion we read: a status computed from a stale cache is refused (409)
    // and the key retried, instead of overwriting what a newer round wrote (restart counts).
    client_.patch(cifartrainjobs(job.namespace_).named(job.name).sub("status"),
                  {{"metadata", {{"resourceVersion", object["metadata"]["resourceVersion"]}}},
                   {"status", replacing_merge_patch(old_status, new_status)}},
                  kube::PatchType::kMerge);
    if (new_status.value("state", "") != old_status.value("state", "")) {
      spdlog::info("{}: state {}", key, new_status.value("state", ""));
    }
  }
  int deleted = 0;
  for (const auto& name : plan.delete_pods) {
    try {
      client_.remove(kube::pods(job.namespace_).named(name));
      ++deleted;
      spdlog::info("{}: deleted pod {}", key, name);
    } catch (const kube::ApiError& e) {
      if (e.status() != 404) throw;
    }
    if (const auto uid = pod_uids.find(name); uid != pod_uids.end()) {
      expectations_.expect_deleted(key, uid->second);
    }
  }
  for (const auto& name : plan.force_delete_pods) {
    const auto uid = pod_uids.find(name);
    try {
      client_.force_remove(kube::pods(job.namespace_).named(name),
                           uid == pod_uids.end() ? "" : uid->second);
      ++deleted;
      spdlog::warn("{}: deleted pod {} for good (its node is lost)", key, name);
    } catch (const kube::ApiError& e) {
      if (e.status() != 404 && e.status() != 409) throw;  // gone, or replaced already
    }
    if (uid != pod_uids.end()) expectations_.expect_deleted(key, uid->second);
  }
  metrics_.add_pods_deleted(deleted);
  for (const auto& name : plan.release_pods) {
    try {
      client_.patch(kube::pods(job.namespace_).named(name), kueue::release_patch(),
                    kube::PatchType::kStrategicMerge);
      spdlog::info("{}: took Kueue's finalizer off pod {} (it is replaced under its name)", key,
                   name);
    } catch (const kube::ApiError& e) {
      if (e.status() != 404) throw;
    }
  }
  for (const auto& workload : plan.delete_workloads) {
    try {
      client_.remove(kueue::workloads(job.namespace_).named(workload));
      spdlog::info("{}: deleted Kueue Workload {}, whose admission ended", key, workload);
    } catch (const kube::ApiError& e) {
      if (e.status() != 404) throw;
    }
  }
  for (const auto& event : plan.events) record_event(object, event);
  if (plan.delete_job) {
    try {
      client_.remove(cifartrainjobs(job.namespace_).named(job.name));
      spdlog::info("{}: deleted (ttlSecondsAfterFinished)", key);
    } catch (const kube::ApiError& e) {
      if (e.status() != 404) throw;
    }
  }
}

void Applier::record_event(const json& object, const EventRecord& event) {
  const auto& m = object["metadata"];
  const auto now = format_time(Clock::now());
  const json record = {{"apiVersion", "v1"},
                       {"kind", "Event"},
                       {"metadata", {{"generateName", m["name"].get<std::string>() + "-"}}},
                       {"involvedObject",
                        {{"apiVersion", kApiVersion},
                         {"kind", kKind},
                         {"name", m["name"]},
                         {"namespace", m.value("namespace", "")},
                         {"uid", m.value("uid", "")}}},
                       {"type", event.type},
                       {"reason", event.reason},
                       {"message", event.message},
                       {"source", {{"component", "cifar-operator"}}},
                       {"firstTimestamp", now},
                       {"lastTimestamp", now},
                       {"count", 1}};
  try {
    client_.create(kube::events(m.value("namespace", "")), record);
  } catch (const kube::ApiError& e) {
    spdlog::warn("could not record event {}: {}", event.reason, e.what());  // not worth a retry
  }
}

}  // namespace cifar::op
