// A CifarTrainJob (deploy/crds/) as typed C++: the spec read from the JSON the API server stores
// (its schema defaults already applied; the same defaults are used for fields it lacks), and
// InvalidSpec for what the schema cannot check, naming the field.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "contract/enum_names.h"
#include "contract/roles.h"

namespace cifar::op {

// "ps", "master", "worker", "evaluator": TF_CONFIG task types, pod names, label values.
using contract::kRoles;
using contract::Role;
using contract::role_name;
// "PS", "Master", "Worker", "Evaluator": the keys of spec.replicaSpecs.
std::string_view replica_type(Role role);

struct ReplicaSpec {
  int replicas = 0;  // an elastic role's desired size
  // Workers only: an elastic job trains with any number from min_replicas to max_replicas (both 0:
  // a fixed size).
  int min_replicas = 0;
  int max_replicas = 0;
  [[nodiscard]] bool elastic() const { return max_replicas > 0; }
  nlohmann::json resources = nlohmann::json::object();     // a core/v1 ResourceRequirements
  nlohmann::json pod_template = nlohmann::json::object();  // fields merged into the pods
  [[nodiscard]] int64_t gpus() const;                      // limits["nvidia.com/gpu"], 0 if none
};

struct VolumeSource {
  std::string claim_name;  // a PersistentVolumeClaim
  std::string path;        // where it is mounted
};

// checkpoint.uri and checkpoint.s3: the run's checkpoints in S3-compatible object storage.
struct ObjectStoreSource {
  std::string uri;                   // s3://BUCKET[/PREFIX]
  std::string endpoint;              // "": AWS's regional endpoint
  std::string region;                // "": the runtime's default (us-east-1)
  std::string addressing;            // "Path", "VirtualHost", "": by the endpoint
  std::string credentials_secret;    // a Secret with AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY
  std::string ca_bundle_config_map;  // "": the system's CAs; else a ConfigMap whose ca.crt to trust
};

// The spec's fields that the CRD limits to a few names (its enums) are enums past parse_spec; each
// one's names are one table, spelled as the CRD spells them (name_of gives the name back).
using contract::EnumNames;
using contract::name_of;

// Of the forward pass (training.precision): auto is bf16 on GPUs that have it, else fp32. The name
// is cifar-train's --precision value.
enum class Precision { kAuto, kFp32, kBf16 };
inline constexpr EnumNames<Precision, 3> kPrecisionNames{{
    {"auto", Precision::kAuto},
    {"fp32", Precision::kFp32},
    {"bf16", Precision::kBf16},
}};

// The extended resource of NVIDIA's device plugin: a replica's GPUs, and GPU nodes' taint key.
inline constexpr char kGpuResource[] = "nvidia.com/gpu";

// Where the trainers compute (training.device), cifar-train's -c: auto is cuda for a replica that
// asks for nvidia.com/gpu and cpu for one that does not; cpu and cuda say so whatever it asks for
// (cpu: a job that must hold GPUs without using them, e.g. on nodes whose GPUs are not there).
enum class Device { kAuto, kCpu, kCuda };
inline constexpr EnumNames<Device, 3> kDeviceNames{{
    {"auto", Device::kAuto},
    {"cpu", Device::kCpu},
    {"cuda", Device::kCuda},
}};

// What a failed pod means (runPolicy.restartPolicy): Never, the job fails; OnFailure, the kubelet
// restarts it in place; ExitCode, the operator recreates it if its exit code is retryable
// (contract/exit_codes.h) and else fails the job.
enum class RestartPolicy { kNever, kOnFailure, kExitCode };
inline constexpr EnumNames<RestartPolicy, 3> kRestartPolicyNames{{
    {"Never", RestartPolicy::kNever},
    {"OnFailure", RestartPolicy::kOnFailure},
    {"ExitCode", RestartPolicy::kExitCode},
}};

// The pods a finished job deletes (runPolicy.cleanPodPolicy): all, those still running or pending,
// or none.
enum class CleanPodPolicy { kAll, kRunning, kNone };
inline constexpr EnumNames<CleanPodPolicy, 3> kCleanPodPolicyNames{{
    {"All", CleanPodPolicy::kAll},
    {"Running", CleanPodPolicy::kRunning},
    {"None", CleanPodPolicy::kNone},
}};

// What a Stalled job does (runPolicy.onStall, cifartrainjob/stall.h): replace the stalled pods
// (charged to backoffLimit), fail, or only report.
enum class OnStall { kRestart, kFail, kReport };
inline constexpr EnumNames<OnStall, 3> kOnStallNames{{
    {"Restart", OnStall::kRestart},
    {"Fail", OnStall::kFail},
    {"Report", OnStall::kReport},
}};

// How a job's pods are spread over nodes (runPolicy.schedulingPolicy.spreadAcrossNodes): a
// topology spread constraint on the node's hostname, skew at most 1, that the scheduler prefers
// (ScheduleAnyway), requires (DoNotSchedule), or none.
enum class NodeSpread { kPreferred, kRequired, kNone };
inline constexpr EnumNames<NodeSpread, 3> kNodeSpreadNames{{
    {"Preferred", NodeSpread::kPreferred},
    {"Required", NodeSpread::kRequired},
    {"None", NodeSpread::kNone},
}};

struct JobSpec {
  std::string image;
  std::string model;
  int num_classes = 0;  // 0: the dataset's
  std::string dataset;
  std::optional<VolumeSource> dataset_volume;
  bool download = false;        // the official archive, MD5-checked, into an emptyDir
  std::string download_mirror;  // base URL instead of the official one
  // dataset.uri, s3://BUCKET/PREFIX: the CIFAR files in the checkpoint store (checkpoint.s3's
  // endpoint and credentials), fetched by each pod that reads data into an emptyDir.
  std::string dataset_uri;

  int epochs = 100;
  int batch_size = 64;
  std::string optimizer = "sgd";
  double momentum = 0.9;
  bool nesterov = true;
  double learning_rate = 0.05;
  std::string schedule = "cosine";
  double warmup_epochs = 0;
  double weight_decay = 0.0005;
  double label_smoothing = 0;
  Precision precision = Precision::kAuto;
  Device device = Device::kAuto;
  int64_t seed = 1;

  bool parameter_server = false;  // strategy.type ParameterServer (else AllReduce)
  std::string ps_mode = "sync";
  std::optional<int> staleness;
  std::string backend = "auto";
  double bucket_cap_mb = 25;
  bool overlap = true;
  std::optional<int> collective_timeout_seconds;  // strategy.allReduce.timeoutSeconds

  std::map<Role, ReplicaSpec> replicas;               // every role, replicas 0 when absent
  std::optional<VolumeSource> checkpoint_volume;      // none (and no store): an emptyDir
  std::optional<ObjectStoreSource> checkpoint_store;  // instead of a volume
  int64_t checkpoint_every_steps = 0;
  int keep_checkpoints = 3;
  int max_unsaved_seconds = 600;  // checkpoint.maxUnsavedSeconds: how long the store may be away
  // A run to continue ("": none): a directory on the checkpoint volume, or an s3:// URI (a run in
  // the job's object store, perhaps started on another cluster).
  std::string resume_from;

  RestartPolicy restart_policy = RestartPolicy::kOnFailure;
  int backoff_limit = 3;
  std::optional<int64_t> active_deadline_seconds;
  std::optional<int64_t> ttl_seconds_after_finished;
  CleanPodPolicy clean_pod_policy = CleanPodPolicy::kRunning;
  bool suspend = false;
  // A pod that has not started this long after it was created fails the job (0: wait forever).
  int64_t startup_deadline_seconds = 600;
  // A deleted pod still there this long after its grace period fails the job (0: wait forever).
  int64_t terminating_deadline_seconds = 300;
  // A pod whose node has not been Ready this long is deleted for good (its node cannot confirm)
  // and created again on a live node; not counted against backoffLimit (0: at once). Short, since
  // a pod replaced wrongly (its node was cut off, not dead) is fenced out of the run
  // (train/fence.h).
  int64_t node_failure_grace_seconds = 30;
  // runPolicy.stallTimeoutSeconds, each trainer's --stall-seconds: nullopt, each derives its own
  // (runtime/health/watchdog.h); 0: no stall detection.
  std::optional<int64_t> stall_timeout_seconds;
  // runPolicy.stallStartupSeconds, each trainer's --stall-startup-seconds (the limit's floor until
  // its first step): nullopt, the runtime's default (300 s).
  std::optional<int64_t> stall_startup_seconds;
  OnStall on_stall = OnStall::kRestart;
  std::string scheduler_name;
  std::string priority_class;
  // A Kueue LocalQueue of the job's namespace: the job's pods wait there, gated, until Kueue admits
  // them all as one group ("": no queue, the pods go straight to the scheduler).
  std::string queue;
  // runPolicy.schedulingPolicy.topology: a topology level (the node label of a rack, a block, a
  // zone) within whose one domain Kueue's Topology Aware Scheduling places all of the job's pods:
  // required (the job waits until one domain has room for all of them) or preferred (as few
  // domains as it can). Needs a queue and a Kueue ResourceFlavor with a Topology of that level.
  struct Topology {
    bool required = true;
    std::string level;
  };
  std::optional<Topology> topology;
  NodeSpread spread_across_nodes = NodeSpread::kPreferred;

  // Whether the job's workers are elastic (replicaSpecs.Worker.minReplicas/maxReplicas).
  [[nodiscard]] bool elastic() const {
    const auto found = replicas.find(Role::kWorker);
    return found != replicas.end() && found->second.elastic();
  }
  // An elastic all-reduce job: its ranks meet at a rendezvous store pod of their own, and each
  // worker may be rank 0, the chief (a parameter-server job's chief is its master, not elastic).
  [[nodiscard]] bool elastic_allreduce() const { return elastic() && !parameter_server; }
  [[nodiscard]] int count(Role role) const {
    const auto found = replicas.find(role);
    return found == replicas.end() ? 0 : found->second.replicas;
  }
};

// A spec the operator cannot run: the job gets condition Failed, reason InvalidSpec, and this
// message; nothing is created for it.
class InvalidSpec : public std::runtime_error {
 public:
  InvalidSpec(const std::string& field, const std::string& problem)
      : std::runtime_error("spec." + field + ": " + problem), field_(field) {}
  [[nodiscard]] const std::string& field() const { return field_; }

 private:
  std::string field_;
};

// Reads `spec` (the object's .spec); throws InvalidSpec.
JobSpec parse_spec(const nlohmann::json& spec);
// Reads only spec.runPolicy into `s` (part of parse_spec): enough to clean up after a finished
// job whose spec was since edited into one that parse_spec refuses. Throws InvalidSpec.
void parse_run_policy(const nlohmann::json& spec, JobSpec& s);

// The object a reconcile works on: identity and spec.
struct Job {
  std::string name;
  std::string namespace_;
  std::string uid;
  JobSpec spec;
  // The run's model dir once chosen (status.modelDir): it never moves under a running job, even
  // if checkpoint.resumeFrom is edited or the naming rule changes. "": from the spec.
  std::string run_dir;
  // A job whose Secret an operator before per-role credentials made (its Service says which,
  // desired_state.h): its PS and trainers share that Secret's one certificate while it runs.
  bool shared_credentials = false;
};

}  // namespace cifar::op
