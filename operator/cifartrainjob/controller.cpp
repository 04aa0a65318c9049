#include "cifartrainjob/controller.h"

#include <spdlog/spdlog.h>

#include <set>
#include <thread>
#include <vector>

#include "cifartrainjob/desired_state.h"
#include "cifartrainjob/progress_scraper.h"
#include "cifartrainjob/resource.h"
#include "cifartrainjob/unsaved_stop.h"
#include "contract/labels.h"
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

// A pod as the controller reads it: metadata, status (trimmed), its node, and its containers'
// names and ports (the metrics port); the rest of the spec (env with TF_CONFIG, args, resources)
// is what we wrote.
void trim_pod(json& pod) {
  Informer::strip_managed_fields(pod);
  if (const auto status = pod.find("status"); status != pod.end()) trim_pod_status(*status);
  auto spec = pod.find("spec");
  if (spec == pod.end()) return;
  json containers = json::array();
  for (auto& container : spec->value("containers", json::array())) {
    containers.push_back({{"name", container.value("name", "")},
                          {"ports", container.value("ports", json::array())}});
  }
  json trimmed = {{"containers", std::move(containers)}};
  if (spec->contains("nodeName")) trimmed["nodeName"] = (*spec)["nodeName"];  // its node's health
  if (spec->contains("terminationGracePeriodSeconds")) {  // what an unsaved stop's Event says
    trimmed["terminationGracePeriodSeconds"] = (*spec)["terminationGracePeriodSeconds"];
  }
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
    const auto role = pod_role(pod);
    if (!role) continue;
    counts[std::string(role_name(*role))][std::string(pod_phase_name(pod_phase(pod)))] += 1;
  }
  return counts;
}

}  // namespace

JobController::JobController(kube::Client& client, ControllerOptions options,
                             OperatorMetrics& metrics)
    : client_(client),
      options_(std::move(options)),
      metrics_(metrics),
      nodes_(client_, [this](const std::string& node) { enqueue_jobs_on_node(node); }),
      workloads_(client_, options_.namespace_,
                 [this](const std::string& job_key) { queue_.add(job_key); }) {
  auto enqueue_job = [this](const json& job) { queue_.add(Informer::key_of(job)); };
  auto enqueue_owner = [this](const json& object) {
    if (const auto key = owner_key(object); !key.empty()) queue_.add(key);
  };
  auto on_pod = [this](const json& pod) {
    const auto key = owner_key(pod);
    if (key.empty()) return;
    // A deleted pod is gone from the cache by now; its end is seen only here.
    if (killed_at_end_of_grace(pod) && !pods_->get(Informer::key_of(pod))) {
      const std::lock_guard lock(deleted_pods_mu_);
      deleted_pods_[key].push_back(pod);
    }
    queue_.add(key);
  };
  const kube::ListOptions owned{contract::label::kJobName, "", ""};  // label exists
  jobs_ = std::make_unique<Informer>(client_, cifartrainjobs(options_.namespace_),
                                     kube::ListOptions{}, enqueue_job);
  pods_ = std::make_unique<Informer>(client_, kube::pods(options_.namespace_), owned, on_pod,
                                     trim_pod, owner_key);
  services_ = std::make_unique<Informer>(client_, kube::services(options_.namespace_), owned,
                                         enqueue_owner);
}

void JobController::enqueue_jobs_on_node(const std::string& name) {
  std::set<std::string> keys;
  pods_->for_each([&](const json& pod) {
    if (pod_node(pod) == name) {
      if (auto key = owner_key(pod); !key.empty()) keys.insert(std::move(key));
    }
  });
  for (const auto& key : keys) queue_.add(key);
}

JobController::~JobController() { queue_.shut_down(); }

void JobController::run(const std::atomic<bool>& stop) {
  jobs_->start();
  pods_->start();
  services_->start();
  nodes_.start();
  for (auto* informer : {jobs_.get(), pods_.get(), services_.get()}) {
    while (!informer->wait_for_sync(std::chrono::milliseconds(200))) {
      if (stop.load()) break;
    }
  }
  // The nodes' health, briefly: a job whose pods sit on a dead node (an operator restarted after
  // it ran there) must not be judged before it is known. Not waited for longer: without RBAC on
  // nodes the jobs still run, and only lost nodes go unnoticed.
  if (!nodes_.wait_for_sync(std::chrono::seconds(10))) {
    spdlog::warn("the node cache has not synced (RBAC on nodes?): pods on lost nodes go unnoticed");
  }
  ready_ = !stop.load();
  spdlog::info("caches synced: {} jobs, {} pods; {} workers", jobs_->size(), pods_->size(),
               options_.workers);
  std::vector<std::thread> workers;
  workers.reserve(static_cast<size_t>(options_.workers));
  for (int i = 0; i < options_.workers; ++i) workers.emplace_back([&] { work(stop); });
  std::thread progress;
  if (options_.progress_interval.count() > 0) {
    progress = std::thread([&] {
      ProgressScraper(
          *jobs_, *pods_, options_.progress_interval, options_.progress_concurrency,
          [this](const std::string& key, json reading) { put_progress(key, std::move(reading)); },
          [this](const std::string& key, const JobLiveness& answered, const MissedPods& missed) {
            put_heard(key, answered, missed);
          })
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
  nodes_.stop();
  workloads_.stop();
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
    take_deleted_pods(key);
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
    job.shared_credentials = observed.service_exists && !has_per_role_credentials(*service);
    observed.progress = progress_of(key);
    observed.liveness = liveness_of(key);
    for (auto& pod : take_deleted_pods(key)) {
      if (controlled_by(pod, job.uid)) observed.deleted_pods.push_back(std::move(pod));
    }
    observed.troubled_nodes = nodes_.troubled_nodes_of(observed.pods);
    workloads_.observe(job, observed);
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
    applier_.apply(*object, job, plan, pod_uids);
    if (plan.status.finished()) forget_progress(key);
  } catch (const CreateBlocked& blocked) {
    // What could be made was made; the status says what was not, and the job tries again.
    spdlog::info("{}: {}; trying again in {} s", key, blocked.what(),
                 blocked.retry_after().count());
    auto noted = plan;
    note_blocked_create(noted, blocked.reason(), blocked.what(), Clock::now());
    // No pod took the round's incarnation: it is not spent (else every retry would change the
    // status, whose every change is a new round at once).
    if (blocked.pods_created() == 0) noted.status.incarnation = status.incarnation;
    applier_.update_status_and_delete(*object, job, noted, pod_uids);
    return plan.requeue_after ? std::min(*plan.requeue_after, blocked.retry_after())
                              : blocked.retry_after();
  } catch (const kube::ApiError& e) {
    if (!is_permanent_refusal(e)) throw;
    // The server will refuse this object however often it is sent (an invalid name, a rejected
    // field): say so in the job's status and an Event instead of retrying forever.
    spdlog::warn("{}: the API server refused an object for good: {}", key, e.what());
    applier_.apply(
        *object, job,
        reconcile_failed(status, reason::kCreateRejected,
                         "the API server refused an object of the job: " + std::string(e.what()),
                         Clock::now()),
        {});
  }
  return plan.requeue_after;
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
  liveness_.erase(key);
}

void JobController::put_heard(const std::string& key, const JobLiveness& answered,
                              const MissedPods& missed) {
  bool changed = false;
  {
    const std::lock_guard lock(progress_mu_);
    changed = merge_heard(liveness_[key], answered, missed);
  }
  if (changed) queue_.add(key);
}

JobLiveness JobController::liveness_of(const std::string& key) {
  const std::lock_guard lock(progress_mu_);
  const auto found = liveness_.find(key);
  return found == liveness_.end() ? JobLiveness{} : found->second;
}

std::vector<json> JobController::take_deleted_pods(const std::string& key) {
  const std::lock_guard lock(deleted_pods_mu_);
  const auto found = deleted_pods_.find(key);
  if (found == deleted_pods_.end()) return {};
  auto pods = std::move(found->second);
  deleted_pods_.erase(found);
  return pods;
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
