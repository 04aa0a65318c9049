#include "cifartrainjob/controller.h"

#include <spdlog/spdlog.h>
#include <sys/random.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <iomanip>
#include <map>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "cifartrainjob/desired_state.h"
#include "cifartrainjob/progress_scraper.h"
#include "cifartrainjob/resource.h"
#include "contract/labels.h"
#include "framework/kueue.h"
#include "framework/merge_patch.h"
#include "framework/node_status.h"
#include "framework/owner.h"
#include "framework/pod_status.h"

namespace cifar::op {
namespace {

using nlohmann::json;

// The job a pod or Service belongs to, "namespace/job" from its job-name label ("" for none).
std::string owner_key(const json& object) {
  const auto& m = object["metadata"];
  const auto labels = m.find("labels");
  if (labels == m.end()) return "";
  const auto job = labels->find(contract::label::kJobName);
  if (job == labels->end()) return "";
  return m.value("namespace", "") + "/" + job->get<std::string>();
}

// A refusal that no retry can change: a 4xx other than conflict (a stale read) and throttling.
bool is_permanent(const kube::ApiError& e) {
  return e.status() >= 400 && e.status() < 500 && e.status() != 409 && e.status() != 429;
}

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

// A create that could not be made now and is tried again later: refused for now by the server
// (reason FailedCreate) or blocked by an object of its name the job does not control (NotOwned).
// apply stops creating and says so with this.
class CreateBlocked : public std::runtime_error {
 public:
  CreateBlocked(std::string_view reason, const std::string& message)
      : std::runtime_error(message), reason_(reason) {}
  [[nodiscard]] std::string_view reason() const { return reason_; }
  // How soon the job tries again: a quota frees up by itself; a foreign object needs a person.
  [[nodiscard]] std::chrono::seconds retry_after() const {
    return std::chrono::seconds(reason_ == reason::kFailedCreate ? 10 : 30);
  }

 private:
  std::string_view reason_;
};

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

// A pod as the controller reads it: metadata, status, its node, and its containers' names and
// ports (the metrics port); the rest of the spec (env with TF_CONFIG, args, resources) is what we
// wrote.
void trim_pod(json& pod) {
  Informer::strip_managed_fields(pod);
  auto spec = pod.find("spec");
  if (spec == pod.end()) return;
  json containers = json::array();
  for (auto& container : spec->value("containers", json::array())) {
    containers.push_back({{"name", container.value("name", "")},
                          {"ports", container.value("ports", json::array())}});
  }
  json trimmed = {{"containers", std::move(containers)}};
  if (spec->contains("nodeName")) trimmed["nodeName"] = (*spec)["nodeName"];  // its node's health
  if (spec->contains("schedulingGates")) trimmed["schedulingGates"] = (*spec)["schedulingGates"];
  *spec = std::move(trimmed);
}

// The job's pods by replica type and phase, for the metrics: every replica type of the spec, so
// that its series read 0 rather than vanish while it has no pods, and any a pod is labelled with.
OperatorMetrics::PodCounts count_pods(const JobSpec& spec, const std::vector<json>& pods) {
  OperatorMetrics::PodCounts counts;
  for (const auto& [role, replica] : spec.replicas) {
    if (replica.replicas > 0) counts[std::string(role_name(role))];
  }
  for (const auto& pod : pods) {
    const auto type =
        pod["metadata"].value("labels", json::object()).value(contract::label::kReplicaType, "");
    if (type.empty()) continue;
    const auto phase = pod_phase(pod);
    counts[type][phase.empty() ? "Pending" : phase] += 1;  // the API server's first phase
  }
  return counts;
}

}  // namespace

JobController::JobController(kube::Client& client, ControllerOptions options,
                             OperatorMetrics& metrics)
    : client_(client), options_(std::move(options)), metrics_(metrics) {
  auto enqueue_job = [this](const json& job) { queue_.add(Informer::key_of(job)); };
  auto enqueue_owner = [this](const json& object) {
    if (const auto key = owner_key(object); !key.empty()) queue_.add(key);
  };
  const kube::ListOptions owned{contract::label::kJobName, "", ""};  // label exists
  jobs_ = std::make_unique<Informer>(client_, cifartrainjobs(options_.namespace_),
                                     kube::ListOptions{}, enqueue_job);
  pods_ = std::make_unique<Informer>(client_, kube::pods(options_.namespace_), owned, enqueue_owner,
                                     trim_pod, owner_key);
  services_ = std::make_unique<Informer>(client_, kube::services(options_.namespace_), owned,
                                         enqueue_owner);
  nodes_ = std::make_unique<Informer>(
      client_, kube::nodes(), kube::ListOptions{},
      [this](const json& node) { note_node(node["metadata"].value("name", "")); }, trim_node);
  // A pod group's Workload is named "<job>-<8 characters of its uid>" (pod_group_name): its job
  // is known from its name alone, also once the pods that own it are gone.
  workloads_ = std::make_unique<Informer>(
      client_, kueue::workloads(options_.namespace_), kube::ListOptions{},
      [this](const json& workload) {
        const auto name = workload["metadata"].value("name", "");
        constexpr size_t kSuffix = 9;  // "-" and 8 characters of the uid
        if (name.size() > kSuffix && name[name.size() - kSuffix] == '-') {
          queue_.add(workload["metadata"].value("namespace", "") + "/" +
                     name.substr(0, name.size() - kSuffix));
        }
      },
      kueue::trim_workload);
}

void JobController::observe_workload(const Job& job, Observed& observed) {
  if (job.spec.queue.empty()) return;
  std::call_once(workloads_started_, [this] {
    spdlog::info("a job names a queue: watching Kueue's Workloads");
    workloads_->start();
  });
  observed.workload_known = workloads_->synced();
  if (const auto cached = workloads_->get(job.namespace_ + "/" + pod_group_name(job))) {
    observed.workload = kueue::workload_state(*cached);
  }
}

void JobController::note_node(const std::string& name) {
  const auto cached = nodes_->get("/" + name);
  const auto trouble = cached ? node_trouble(*cached) : std::nullopt;
  {
    const std::lock_guard lock(nodes_mu_);
    const auto known = troubled_nodes_.find(name);
    const bool was = known != troubled_nodes_.end();
    if (!trouble && !was) return;
    if (trouble && was && known->second == *trouble) return;
    if (trouble) {
      spdlog::warn("node {} is in trouble: {} {}", name, trouble->reason, trouble->message);
      troubled_nodes_[name] = *trouble;
    } else {
      spdlog::info("node {} is {}", name, cached ? "Ready again" : "gone");
      troubled_nodes_.erase(known);
    }
  }
  // The jobs with pods on it look again.
  std::set<std::string> keys;
  pods_->for_each([&](const json& pod) {
    if (pod_node(pod) == name) {
      if (auto key = owner_key(pod); !key.empty()) keys.insert(std::move(key));
    }
  });
  for (const auto& key : keys) queue_.add(key);
}

NodeTroubles JobController::troubled_nodes_of(const std::vector<json>& pods) {
  NodeTroubles troubles;
  const std::lock_guard lock(nodes_mu_);
  if (troubled_nodes_.empty()) return troubles;
  for (const auto& pod : pods) {
    if (const auto found = troubled_nodes_.find(pod_node(pod)); found != troubled_nodes_.end()) {
      troubles.insert(*found);
    }
  }
  return troubles;
}

JobController::~JobController() { queue_.shut_down(); }

void JobController::run(const std::atomic<bool>& stop) {
  jobs_->start();
  pods_->start();
  services_->start();
  nodes_->start();
  for (auto* informer : {jobs_.get(), pods_.get(), services_.get()}) {
    while (!informer->wait_for_sync(std::chrono::milliseconds(200))) {
      if (stop.load()) break;
    }
  }
  // The nodes' health, briefly: a job whose pods sit on a dead node (an operator restarted after
  // it ran there) must not be judged before it is known. Not waited for longer: without RBAC on
  // nodes the jobs still run, and only lost nodes go unnoticed.
  if (!nodes_->wait_for_sync(std::chrono::seconds(10))) {
    spdlog::warn("the node cache has not synced (RBAC on nodes?): pods on lost nodes go unnoticed");
  }
  ready_ = !stop.load();
  spdlog::info("caches synced: {} jobs, {} pods; {} workers",
               jobs_->list([](auto&) { return true; }).size(),
               pods_->list([](auto&) { return true; }).size(), options_.workers);
  std::vector<std::thread> workers;
  workers.reserve(static_cast<size_t>(options_.workers));
  for (int i = 0; i < options_.workers; ++i) workers.emplace_back([&] { work(stop); });
  std::thread progress;
  if (options_.progress_interval.count() > 0) {
    progress = std::thread([&] {
      ProgressScraper(
          *jobs_, *pods_, options_.progress_interval,
          [this](const std::string& key, json reading) { put_progress(key, std::move(reading)); })
          .run(stop);
    });
  }
  while (!stop.load()) {
    try {
      metrics_.set_queue_depth(static_cast<double>(queue_.depth()));
      metrics_.set_delayed_depth(static_cast<double>(queue_.delayed_depth()));
      update_job_counts();
    } catch (const std::exception& e) {  // the threads above must still be joined
      spdlog::warn("job metrics: {}", e.what());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  queue_.shut_down();
  for (auto& w : workers) w.join();
  if (progress.joinable()) progress.join();
  jobs_->stop();
  pods_->stop();
  services_->stop();
  nodes_->stop();
  workloads_->stop();
  ready_ = false;
}

void JobController::work(const std::atomic<bool>& stop) {
  while (auto key = queue_.get()) {
    if (stop.load()) {
      queue_.done(*key);
      break;
    }
    const auto start = Steady::now();
    try {
      const auto requeue = reconcile_key(*key);
      queue_.forget(*key);
      if (requeue) queue_.add_after(*key, *requeue);
      metrics_.record_reconcile(requeue ? "requeue" : "success",
                                std::chrono::duration<double>(Steady::now() - start).count());
    } catch (const kube::ApiError& e) {
      if (e.status() == 409) {
        // Our cache was behind the object (usually our own last write): read it again.
        spdlog::debug("reconcile {}: conflict, retrying: {}", *key, e.what());
      } else {
        spdlog::warn("reconcile {} failed (attempt {}), retrying with backoff: {}", *key,
                     queue_.failures(*key) + 1, e.what());
      }
      queue_.add_rate_limited(*key);
      metrics_.record_reconcile(e.status() == 409 ? "conflict" : "error",
                                std::chrono::duration<double>(Steady::now() - start).count());
    } catch (const std::exception& e) {
      spdlog::warn("reconcile {} failed (attempt {}), retrying with backoff: {}", *key,
                   queue_.failures(*key) + 1, e.what());
      queue_.add_rate_limited(*key);
      metrics_.record_reconcile("error",
                                std::chrono::duration<double>(Steady::now() - start).count());
    }
    queue_.done(*key);
  }
}

std::optional<std::chrono::seconds> JobController::reconcile_key(const std::string& key) {
  const auto object = jobs_->get(key);
  if (!object) {  // deleted: its pods go with it (ownerReferences), its series with it
    expectations_.forget(key);
    forget_progress(key);
    const auto [job_namespace, job_name] = Informer::split_key(key);
    metrics_.remove_job(job_namespace, job_name);
    return std::nullopt;
  }
  const auto& metadata = (*object)["metadata"];
  if (metadata.contains("deletionTimestamp")) return std::nullopt;
  Job job;
  job.name = metadata["name"];
  job.namespace_ = metadata.value("namespace", "");
  job.uid = metadata.value("uid", "");
  const auto status = object->value("status", json::object()).get<JobStatus>();
  if (status.finished()) forget_progress(key);
  Plan plan;
  std::map<std::string, std::string> pod_uids;  // name -> uid of the pods seen, for deletes
  Observed observed;
  // Only the pods this job controls are its own; others with its label (orphans of an earlier job
  // of the same name, a user's pods) are reported and never touched.
  for (auto& pod : pods_->indexed(key)) {
    if (controlled_by(pod, job.uid)) {
      observed.pods.push_back(std::move(pod));
    } else {
      observed.foreign_pods[pod["metadata"]["name"]] = describe_controller(pod);
    }
  }
  try {
    job.spec = parse_spec(object->value("spec", json::object()));
    if (const auto wait = expectations_.pending(key, observed.pods)) {
      // Our own creates or deletes are not in the cache yet: their watch events requeue the job.
      return std::chrono::duration_cast<std::chrono::seconds>(*wait) + std::chrono::seconds(1);
    }
    for (const auto& pod : observed.pods) {
      pod_uids[pod["metadata"]["name"]] = pod["metadata"].value("uid", "");
    }
    const auto service = services_->get(job.namespace_ + "/" + job.name);
    observed.service_exists = service && controlled_by(*service, job.uid);
    observed.progress = progress_of(key);
    observed.troubled_nodes = troubled_nodes_of(observed.pods);
    observe_workload(job, observed);
    plan = reconcile(job, status, observed, Clock::now());
  } catch (const InvalidSpec& e) {
    if (!status.finished()) {
      plan = reconcile_failed(status, reason::kInvalidSpec, e.what(), Clock::now());
    } else {
      // Edited after it ended into a spec we refuse: it stays as it ended, and its pods' cleanup
      // and its TTL still follow its run policy (the defaults, if that is what was broken).
      spdlog::warn("{}: finished job's spec is now invalid ({}); cleaning up as it ended", key,
                   e.what());
      job.spec = JobSpec{};
      try {
        parse_run_policy(object->value("spec", json::object()), job.spec);
      } catch (const InvalidSpec&) {
        job.spec = JobSpec{};
      }
      plan = reconcile(job, status, observed, Clock::now());
    }
  }
  metrics_.set_job_pods(job.namespace_, job.name, count_pods(job.spec, observed.pods));
  metrics_.set_job_restarts(job.namespace_, job.name, plan.restarts);
  try {
    apply(*object, job, plan, pod_uids);
    if (plan.status.finished()) forget_progress(key);
  } catch (const CreateBlocked& blocked) {
    // What could be made was made; the status says what was not, and the job tries again.
    spdlog::info("{}: {}; trying again in {} s", key, blocked.what(),
                 blocked.retry_after().count());
    auto noted = plan;
    note_blocked_create(noted, blocked.reason(), blocked.what(), Clock::now());
    update_status_and_delete(*object, job, noted, pod_uids);
    return plan.requeue_after ? std::min(*plan.requeue_after, blocked.retry_after())
                              : blocked.retry_after();
  } catch (const kube::ApiError& e) {
    if (!is_permanent(e)) throw;
    // The server will refuse this object however often it is sent (an invalid name, a rejected
    // field): say so in the job's status and an Event instead of retrying forever.
    spdlog::warn("{}: the API server refused an object for good: {}", key, e.what());
    apply(*object, job,
          reconcile_failed(status, reason::kCreateRejected,
                           "the API server refused an object of the job: " + std::string(e.what()),
                           Clock::now()),
          {});
  }
  return plan.requeue_after;
}

void JobController::apply(const json& object, const Job& job, const Plan& plan,
                          const std::map<std::string, std::string>& pod_uids) {
  try {
    create_objects(job, plan);
  } catch (const kube::ApiError& e) {
    if (!is_refused_for_now(e)) throw;
    throw CreateBlocked(reason::kFailedCreate,
                        std::string("the API server refuses for now to create an object of the "
                                    "job, retrying: ") +
                            e.what());
  }
  update_status_and_delete(object, job, plan, pod_uids);
}

void JobController::create_objects(const Job& job, const Plan& plan) {
  const auto key = job.namespace_ + "/" + job.name;
  if (plan.create_token_secret) {
    create_owned(client_, kube::secrets(job.namespace_), desired_token_secret(job, random_token()),
                 job);
  }
  if (plan.create_network_policy) {
    create_owned(client_, kube::network_policies(job.namespace_), *plan.create_network_policy, job);
  }
  if (plan.create_service) {
    create_owned(client_, kube::services(job.namespace_), *plan.create_service, job);
    spdlog::info("{}: created Service {}, its token Secret and NetworkPolicy", key, job.name);
  }
  int created = 0;
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

void JobController::update_status_and_delete(const json& object, const Job& job, const Plan& plan,
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
  if (plan.delete_workload) {
    try {
      client_.remove(kueue::workloads(job.namespace_).named(*plan.delete_workload));
      spdlog::info("{}: deleted Kueue Workload {}, whose admission ended", key,
                   *plan.delete_workload);
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

void JobController::record_event(const json& object, const EventRecord& event) {
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

void JobController::put_progress(const std::string& key, json progress) {
  {
    const std::lock_guard lock(progress_mu_);
    progress_[key] = std::move(progress);
  }
  queue_.add(key);
}

std::optional<json> JobController::progress_of(const std::string& key) {
  const std::lock_guard lock(progress_mu_);
  const auto found = progress_.find(key);
  if (found == progress_.end()) return std::nullopt;
  return found->second;
}

void JobController::forget_progress(const std::string& key) {
  const std::lock_guard lock(progress_mu_);
  progress_.erase(key);
}

void JobController::update_job_counts() {
  std::map<std::string, int> counts;
  for (const auto type : kConditionTypes) counts[std::string(condition_type_name(type))] = 0;
  const std::string created(condition_type_name(ConditionType::kCreated));
  jobs_->for_each([&](const json& job) {
    const auto status = job.find("status");
    counts[status == job.end() ? created : status->value("state", created)] += 1;
  });
  for (const auto& [state, n] : counts) metrics_.set_jobs(state, n);
}

}  // namespace cifar::op
