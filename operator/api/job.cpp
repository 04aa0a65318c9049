#include "api/job.h"

#include <algorithm>
#include <cctype>
#include <stdexcept>
#include <string>

#include "storage/s3_location.h"

namespace cifar::op {
namespace {

using nlohmann::json;

// The member `key` of `object` as a T, `fallback` when absent; InvalidSpec when of another type.
template <typename T>
T member(const json& object, const char* key, T fallback, const std::string& path) {
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return fallback;
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    throw InvalidSpec(path + key, "has the wrong type (" + std::string(it->type_name()) + ")");
  }
}

// The member `key` of `object`, one of `names` (a CRD enum), `fallback` when absent; InvalidSpec
// for another name, listing the ones it could be.
template <typename Enum, size_t N>
Enum named_member(const json& object, const char* key, Enum fallback,
                  const EnumNames<Enum, N>& names, const std::string& path) {
  const auto name = member(object, key, name_of(names, fallback), path);
  if (const auto value = contract::find_named(names, name)) return *value;
  throw InvalidSpec(path + key, "'" + name + "' is none of " + contract::list_names(names));
}

const json& object_at(const json& parent, const char* key, const std::string& path) {
  static const json empty = json::object();
  const auto it = parent.find(key);
  if (it == parent.end() || it->is_null()) return empty;
  if (!it->is_object()) throw InvalidSpec(path + key, "must be an object");
  return *it;
}

std::optional<VolumeSource> volume(const json& parent, const std::string& path,
                                   const std::string& default_mount) {
  if (!parent.contains("volume")) return std::nullopt;
  const auto& v = object_at(parent, "volume", path);
  VolumeSource source{member<std::string>(v, "claimName", "", path + "volume."),
                      member<std::string>(v, "path", default_mount, path + "volume.")};
  if (source.claim_name.empty()) throw InvalidSpec(path + "volume.claimName", "is required");
  return source;
}

// InvalidSpec at `path` unless `uri` is an s3:// URI the runtime takes (storage/s3_location.h).
void check_s3_uri(const std::string& uri, const std::string& path) {
  try {
    static_cast<void>(storage::parse_s3_uri(uri));
  } catch (const std::invalid_argument& e) {
    throw InvalidSpec(path, e.what());
  }
}

std::optional<ObjectStoreSource> object_store(const json& checkpoint) {
  if (!checkpoint.contains("uri")) return std::nullopt;
  const std::string path = "checkpoint.";
  ObjectStoreSource store;
  store.uri = member<std::string>(checkpoint, "uri", "", path);
  check_s3_uri(store.uri, path + "uri");
  const auto& s3 = object_at(checkpoint, "s3", path);
  store.endpoint = member<std::string>(s3, "endpoint", "", path + "s3.");
  if (!store.endpoint.empty() && store.endpoint.rfind("http://", 0) != 0 &&
      store.endpoint.rfind("https://", 0) != 0) {
    throw InvalidSpec(path + "s3.endpoint", "must be an http:// or https:// URL");
  }
  store.region = member<std::string>(s3, "region", "", path + "s3.");
  store.addressing = member<std::string>(s3, "addressing", "", path + "s3.");
  if (!store.addressing.empty() && store.addressing != "Path" &&
      store.addressing != "VirtualHost") {
    throw InvalidSpec(path + "s3.addressing",
                      "'" + store.addressing + "' is none of Path, VirtualHost");
  }
  store.ca_bundle_config_map = member<std::string>(s3, "caBundleConfigMap", "", path + "s3.");
  store.credentials_secret = member<std::string>(s3, "credentialsSecret", "", path + "s3.");
  if (store.credentials_secret.empty()) {
    throw InvalidSpec(path + "s3.credentialsSecret",
                      "is required with checkpoint.uri: a Secret with AWS_ACCESS_KEY_ID and "
                      "AWS_SECRET_ACCESS_KEY");
  }
  return store;
}

int dataset_classes(const std::string& dataset) { return dataset == "cifar100" ? 100 : 10; }

}  // namespace

std::string_view replica_type(Role role) {
  switch (role) {
    case Role::kPs:
      return "PS";
    case Role::kMaster:
      return "Master";
    case Role::kWorker:
      return "Worker";
    case Role::kEvaluator:
      return "Evaluator";
  }
  return "";
}

int64_t ReplicaSpec::gpus() const {
  const auto limits = resources.find("limits");
  if (limits == resources.end() || !limits->contains(kGpuResource)) return 0;
  const auto& value = (*limits)[kGpuResource];
  if (value.is_number_integer()) return value.get<int64_t>();
  const auto text = value.is_string() ? value.get<std::string>() : std::string();
  if (text.empty() || !std::all_of(text.begin(), text.end(),
                                   [](unsigned char c) { return std::isdigit(c) != 0; })) {
    throw std::invalid_argument("nvidia.com/gpu must be a whole number of GPUs, not " +
                                value.dump());
  }
  return std::stoll(text);
}

namespace {

// What the CRD's CEL rules say of minReplicas and maxReplicas, again for a server that did not
// check them (validation off, an older CRD): only workers are elastic, within bounds that hold
// their desired size, those of an all-reduce job without a master or of a parameter-server job
// with one.
void check_elastic_workers(const JobSpec& s) {
  for (const auto role : kRoles) {
    const auto& r = s.replicas.at(role);
    const std::string path = "replicaSpecs." + std::string(replica_type(role)) + ".";
    if (role != Role::kWorker && (r.min_replicas > 0 || r.max_replicas > 0)) {
      throw InvalidSpec(path + "minReplicas", "minReplicas and maxReplicas are for Worker only");
    }
  }
  const auto& w = s.replicas.at(Role::kWorker);
  if ((w.min_replicas > 0) != (w.max_replicas > 0)) {
    throw InvalidSpec("replicaSpecs.Worker",
                      "give minReplicas and maxReplicas together (an elastic job), or neither");
  }
  if (!w.elastic()) return;
  if (w.min_replicas > w.max_replicas) {
    throw InvalidSpec("replicaSpecs.Worker.minReplicas", "must be at most maxReplicas");
  }
  if (w.replicas < w.min_replicas || w.replicas > w.max_replicas) {
    throw InvalidSpec("replicaSpecs.Worker.replicas",
                      "must be within [minReplicas, maxReplicas] (an elastic job's desired size)");
  }
  if (s.parameter_server && s.count(Role::kMaster) != 1) {
    throw InvalidSpec("replicaSpecs.Master",
                      "an elastic parameter-server job needs a Master: it is in every update");
  }
  if (!s.parameter_server && s.count(Role::kMaster) > 0) {
    throw InvalidSpec("replicaSpecs.Master",
                      "an elastic all-reduce job's trainers are its Workers: it has no Master");
  }
}

}  // namespace

JobSpec parse_spec(const json& spec) {
  if (!spec.is_object()) throw InvalidSpec("", "must be an object");
  JobSpec s;
  s.image = member<std::string>(spec, "image", "", "");
  if (s.image.empty()) throw InvalidSpec("image", "is required");

  const auto& model = object_at(spec, "model", "");
  s.model = member<std::string>(model, "name", "", "model.");
  if (s.model.empty()) throw InvalidSpec("model.name", "is required");
  s.num_classes = member<int>(model, "numClasses", 0, "model.");

  const auto& dataset = object_at(spec, "dataset", "");
  s.dataset = member<std::string>(dataset, "name", "", "dataset.");
  if (s.dataset.empty()) throw InvalidSpec("dataset.name", "is required");
  s.dataset_volume = volume(dataset, "dataset.", "/data");
  s.download = dataset.contains("download");
  const auto& download = object_at(dataset, "download", "dataset.");
  s.download_mirror = member<std::string>(download, "mirror", "", "dataset.download.");
  if (s.download && s.dataset_volume) {
    throw InvalidSpec("dataset", "give either volume or download, not both");
  }
  if (s.download && s.dataset != "cifar10" && s.dataset != "cifar100") {
    throw InvalidSpec("dataset.download", "only cifar10 and cifar100 can be downloaded");
  }
  s.dataset_uri = member<std::string>(dataset, "uri", "", "dataset.");
  if (!s.dataset_uri.empty()) {
    check_s3_uri(s.dataset_uri, "dataset.uri");
    if (s.download || s.dataset_volume) {
      throw InvalidSpec("dataset.uri", "is an alternative to dataset.volume and dataset.download");
    }
    if (s.dataset != "cifar10" && s.dataset != "cifar100") {
      throw InvalidSpec("dataset.uri", "holds cifar10 or cifar100 binary files, not " + s.dataset);
    }
  }
  if (s.num_classes != 0 && s.dataset != "synthetic" &&
      s.num_classes != dataset_classes(s.dataset)) {
    throw InvalidSpec("model.numClasses",
                      std::to_string(s.num_classes) + " does not match " + s.dataset + "'s " +
                          std::to_string(dataset_classes(s.dataset)) + " classes");
  }

  const auto& training = object_at(spec, "training", "");
  s.epochs = member(training, "epochs", s.epochs, "training.");
  s.batch_size = member(training, "batchSize", s.batch_size, "training.");
  const auto& optimizer = object_at(training, "optimizer", "training.");
  s.optimizer = member(optimizer, "name", s.optimizer, "training.optimizer.");
  s.momentum = member(optimizer, "momentum", s.momentum, "training.optimizer.");
  s.nesterov = member(optimizer, "nesterov", s.nesterov, "training.optimizer.");
  const auto& lr = object_at(training, "learningRate", "training.");
  s.learning_rate = member(lr, "base", s.learning_rate, "training.learningRate.");
  s.schedule = member(lr, "schedule", s.schedule, "training.learningRate.");
  s.warmup_epochs = member(lr, "warmupEpochs", s.warmup_epochs, "training.learningRate.");
  s.weight_decay = member(training, "weightDecay", s.weight_decay, "training.");
  s.label_smoothing = member(training, "labelSmoothing", s.label_smoothing, "training.");
  s.precision = named_member(training, "precision", s.precision, kPrecisionNames, "training.");
  s.device = named_member(training, "device", s.device, kDeviceNames, "training.");
  s.seed = member(training, "seed", s.seed, "training.");

  const auto& strategy = object_at(spec, "strategy", "");
  const auto type = member<std::string>(strategy, "type", "", "strategy.");
  if (type != "ParameterServer" && type != "AllReduce") {
    throw InvalidSpec("strategy.type", "must be ParameterServer or AllReduce, not '" + type + "'");
  }
  s.parameter_server = type == "ParameterServer";
  const auto& ps = object_at(strategy, "parameterServer", "strategy.");
  s.ps_mode = member(ps, "mode", s.ps_mode, "strategy.parameterServer.");
  if (ps.contains("staleness")) {
    s.staleness = member(ps, "staleness", 0, "strategy.parameterServer.");
  }
  const auto& ar = object_at(strategy, "allReduce", "strategy.");
  s.backend = member(ar, "backend", s.backend, "strategy.allReduce.");
  s.bucket_cap_mb = member(ar, "bucketCapMB", s.bucket_cap_mb, "strategy.allReduce.");
  s.overlap = member(ar, "overlap", s.overlap, "strategy.allReduce.");
  if (ar.contains("timeoutSeconds")) {
    s.collective_timeout_seconds = member(ar, "timeoutSeconds", 0, "strategy.allReduce.");
  }

  const auto& replica_specs = object_at(spec, "replicaSpecs", "");
  for (const auto role : kRoles) {
    const std::string key(replica_type(role));
    const std::string path = "replicaSpecs." + key + ".";
    const auto& r = object_at(replica_specs, key.c_str(), "replicaSpecs.");
    ReplicaSpec replica;
    replica.replicas = replica_specs.contains(key) ? member(r, "replicas", 1, path) : 0;
    replica.min_replicas = member(r, "minReplicas", 0, path);
    replica.max_replicas = member(r, "maxReplicas", 0, path);
    replica.resources = object_at(r, "resources", path);
    replica.pod_template = object_at(r, "template", path);
    try {
      (void)replica.gpus();
    } catch (const std::invalid_argument& e) {
      throw InvalidSpec(path + "resources.limits", e.what());
    }
    s.replicas[role] = replica;
  }
  check_elastic_workers(s);
  if (s.count(Role::kMaster) + s.count(Role::kWorker) == 0) {
    throw InvalidSpec("replicaSpecs", "a job needs a Master or at least one Worker");
  }
  if (s.parameter_server != (s.count(Role::kPs) > 0)) {
    throw InvalidSpec("replicaSpecs.PS", s.parameter_server
                                             ? "strategy ParameterServer needs at least one PS"
                                             : "PS replicas need strategy.type ParameterServer");
  }
  if (!s.parameter_server && s.backend == "nccl") {
    if (s.device == Device::kCpu) {
      throw InvalidSpec("training.device",
                        "nccl runs on GPUs only: with training.device cpu the backend is gloo");
    }
    for (const auto role : {Role::kMaster, Role::kWorker}) {
      if (s.count(role) > 0 && s.replicas[role].gpus() == 0) {
        throw InvalidSpec("strategy.allReduce.backend",
                          "nccl needs nvidia.com/gpu in replicaSpecs." +
                              std::string(replica_type(role)) + ".resources.limits");
      }
    }
  }

  const auto& checkpoint = object_at(spec, "checkpoint", "");
  s.checkpoint_volume = volume(checkpoint, "checkpoint.", "/checkpoints");
  s.checkpoint_every_steps =
      member(checkpoint, "everySteps", s.checkpoint_every_steps, "checkpoint.");
  s.keep_checkpoints = member(checkpoint, "keep", s.keep_checkpoints, "checkpoint.");
  s.max_unsaved_seconds =
      member(checkpoint, "maxUnsavedSeconds", s.max_unsaved_seconds, "checkpoint.");
  s.checkpoint_store = object_store(checkpoint);
  if (s.checkpoint_store && s.checkpoint_volume) {
    throw InvalidSpec("checkpoint.uri", "is an alternative to checkpoint.volume: give one of them");
  }
  s.resume_from = member<std::string>(checkpoint, "resumeFrom", "", "checkpoint.");
  if (storage::is_s3_uri(s.resume_from)) {
    if (!s.checkpoint_store) {
      throw InvalidSpec("checkpoint.resumeFrom",
                        "an s3:// run needs checkpoint.uri and checkpoint.s3 (the store's endpoint "
                        "and credentials)");
    }
    check_s3_uri(s.resume_from, "checkpoint.resumeFrom");
  } else if (s.resume_from.find("..") != std::string::npos ||
             (!s.resume_from.empty() && s.resume_from.front() == '/')) {
    throw InvalidSpec("checkpoint.resumeFrom",
                      "must be a directory inside the checkpoint volume, without '..', or an "
                      "s3:// URI");
  }

  if (!s.dataset_uri.empty() && !s.checkpoint_store) {
    throw InvalidSpec(
        "dataset.uri",
        "is read from the checkpoint store: set checkpoint.uri and checkpoint.s3 (its "
        "endpoint and credentials)");
  }
  if (s.count(Role::kEvaluator) > 0 && !s.checkpoint_volume && !s.checkpoint_store) {
    throw InvalidSpec("checkpoint.volume",
                      "an Evaluator needs a checkpoint volume or checkpoint.uri that the trainers "
                      "share with it: without one it could never see a checkpoint");
  }
  if (s.elastic_allreduce() && !s.checkpoint_volume && !s.checkpoint_store) {
    throw InvalidSpec("checkpoint.volume",
                      "an elastic job needs a checkpoint volume or checkpoint.uri that its workers "
                      "share: its chief, which writes the run, moves among them");
  }
  parse_run_policy(spec, s);
  if (s.elastic() && s.topology) {
    // Its workers above the minimum are Kueue groups of their own, each placed as it is admitted
    // (docs/ARCHITECTURE.md, "Elastic jobs"): no one domain could be promised for the job.
    throw InvalidSpec("runPolicy.schedulingPolicy.topology",
                      "not for an elastic job (replicaSpecs.Worker.minReplicas): Kueue admits and "
                      "places its workers above the minimum one by one, so one topology domain "
                      "cannot hold the job");
  }
  return s;
}

namespace {

// runPolicy.schedulingPolicy.topology (JobSpec::topology).
std::optional<JobSpec::Topology> parse_topology(const json& scheduling, const std::string& queue) {
  constexpr const char* kPath = "runPolicy.schedulingPolicy.topology";
  if (!scheduling.contains("topology")) return std::nullopt;
  const auto& topology = object_at(scheduling, "topology", "runPolicy.schedulingPolicy.");
  const auto required =
      member<std::string>(topology, "required", "", "runPolicy.schedulingPolicy.topology.");
  const auto preferred =
      member<std::string>(topology, "preferred", "", "runPolicy.schedulingPolicy.topology.");
  if (required.empty() == preferred.empty()) {
    throw InvalidSpec(kPath,
                      "give one of required or preferred: the node label of the topology level "
                      "(e.g. cifartrain.io/rack) whose one domain is to hold the job's pods");
  }
  if (queue.empty()) {
    throw InvalidSpec(kPath,
                      "needs runPolicy.schedulingPolicy.queue: Kueue's Topology Aware Scheduling "
                      "places the pods of the groups it admits");
  }
  return JobSpec::Topology{!required.empty(), required.empty() ? preferred : required};
}

}  // namespace

void parse_run_policy(const json& spec, JobSpec& s) {
  const auto& run = object_at(spec, "runPolicy", "");
  s.restart_policy =
      named_member(run, "restartPolicy", s.restart_policy, kRestartPolicyNames, "runPolicy.");
  s.backoff_limit = member(run, "backoffLimit", s.backoff_limit, "runPolicy.");
  if (run.contains("activeDeadlineSeconds")) {
    s.active_deadline_seconds = member<int64_t>(run, "activeDeadlineSeconds", 0, "runPolicy.");
  }
  if (run.contains("ttlSecondsAfterFinished")) {
    s.ttl_seconds_after_finished = member<int64_t>(run, "ttlSecondsAfterFinished", 0, "runPolicy.");
  }
  s.clean_pod_policy =
      named_member(run, "cleanPodPolicy", s.clean_pod_policy, kCleanPodPolicyNames, "runPolicy.");
  s.suspend = member(run, "suspend", s.suspend, "runPolicy.");
  const auto& scheduling = object_at(run, "schedulingPolicy", "runPolicy.");
  s.scheduler_name =
      member<std::string>(scheduling, "schedulerName", "", "runPolicy.schedulingPolicy.");
  s.priority_class =
      member<std::string>(scheduling, "priorityClass", "", "runPolicy.schedulingPolicy.");
  s.queue = member<std::string>(scheduling, "queue", "", "runPolicy.schedulingPolicy.");
  s.topology = parse_topology(scheduling, s.queue);
  s.spread_across_nodes = named_member(scheduling, "spreadAcrossNodes", s.spread_across_nodes,
                                       kNodeSpreadNames, "runPolicy.schedulingPolicy.");
  // Bounded as the CRD bounds them (2^31-1 s, 68 years): a time point that far on still fits.
  constexpr int64_t kMaxDeadline = 2147483647;
  s.startup_deadline_seconds = std::clamp<int64_t>(
      member(run, "startupDeadlineSeconds", s.startup_deadline_seconds, "runPolicy."), 0,
      kMaxDeadline);
  s.terminating_deadline_seconds = std::clamp<int64_t>(
      member(run, "terminatingDeadlineSeconds", s.terminating_deadline_seconds, "runPolicy."), 0,
      kMaxDeadline);
  s.node_failure_grace_seconds = std::clamp<int64_t>(
      member(run, "nodeFailureGraceSeconds", s.node_failure_grace_seconds, "runPolicy."), 0,
      kMaxDeadline);
  if (run.contains("stallTimeoutSeconds")) {
    s.stall_timeout_seconds = std::clamp<int64_t>(
        member<int64_t>(run, "stallTimeoutSeconds", 0, "runPolicy."), 0, kMaxDeadline);
  }
  if (run.contains("stallStartupSeconds")) {
    s.stall_startup_seconds = std::clamp<int64_t>(
        member<int64_t>(run, "stallStartupSeconds", 0, "runPolicy."), 1, kMaxDeadline);
  }
  s.on_stall = named_member(run, "onStall", s.on_stall, kOnStallNames, "runPolicy.");
}

}  // namespace cifar::op
