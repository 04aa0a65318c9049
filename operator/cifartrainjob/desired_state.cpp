#include "cifartrainjob/desired_state.h"

#include <charconv>
#include <sstream>

#include "api/group_version.h"
#include "cifartrainjob/kueue_integration.h"
#include "contract/env.h"
#include "contract/flags.h"
#include "contract/labels.h"
#include "contract/ports.h"
#include "contract/termination.h"
#include "security/tls_dir.h"

namespace cifar::op {
namespace {

using nlohmann::json;
namespace flag = contract::flag;
using contract::kC10dStorePort;
using contract::kGrpcPort;
using contract::kMetricsPort;

std::string number(double value) {
  std::ostringstream out;
  out << value;  // shortest form that reads back: 0.05, 25, 1e-05
  return out.str();
}

json owner_reference(const Job& job) {
  return {{"apiVersion", kApiVersion}, {"kind", kKind},
          {"name", job.name},          {"uid", job.uid},
          {"controller", true},        {"blockOwnerDeletion", true}};
}

// The metadata of an object the job owns (Service, Secret, NetworkPolicy): garbage-collected with
// it.
json owned_metadata(const Job& job, const std::string& name) {
  return {{"name", name},
          {"namespace", job.namespace_},
          {"labels", job_labels(job)},
          {"ownerReferences", json::array({owner_reference(job)})}};
}

json env_var(const std::string& name, const std::string& value) {
  return {{"name", name}, {"value", value}};
}

json service_port(contract::NamedPort port) { return {{"name", port.name}, {"port", port.number}}; }

json container_port(contract::NamedPort port) {
  return {{"name", port.name}, {"containerPort", port.number}};
}

// All-reduce ranks: the master (if any) is rank 0, the workers follow in index order.
int rank_of(const JobSpec& spec, Role role, int index) {
  return role == Role::kMaster ? index : spec.count(Role::kMaster) + index;
}

std::string data_path(const JobSpec& spec) {
  return spec.dataset_volume ? spec.dataset_volume->path : "/data";  // else an emptyDir
}

// Where a pod that uses the store finds checkpoint.s3.caBundleConfigMap's CA bundle, under the
// key Kubernetes' own CA ConfigMaps use (kube-root-ca.crt).
constexpr const char* kStoreCaPath = "/etc/cifartrain/store-ca";
constexpr const char* kStoreCaKey = "ca.crt";
// Where a parameter-server job's PS and trainers find the job's credentials (CIFAR_TLS_DIR).
constexpr const char* kTlsPath = "/etc/cifartrain/tls";

// Whose channel is mutual TLS: a parameter-server job's PS and trainers (its evaluator reads
// checkpoints, and all-reduce has no TLS in LibTorch).
bool uses_job_tls(const JobSpec& spec, Role role) {
  return spec.parameter_server && (role == Role::kPs || contract::is_trainer(role));
}

std::string checkpoint_path(const JobSpec& spec) {
  return spec.checkpoint_volume ? spec.checkpoint_volume->path : "/checkpoints";
}

// Tolerates the taint GPU nodes are commonly given (nvidia.com/gpu, any value, NoSchedule).
json gpu_toleration() {
  return {{"key", kGpuResource}, {"operator", "Exists"}, {"effect", "NoSchedule"}};
}

// Adds `toleration` to the pod's, unless the template tolerates its key already.
void tolerate(json& spec, const json& toleration) {
  auto& tolerations = spec["tolerations"];
  if (tolerations.is_null()) tolerations = json::array();
  for (const auto& t : tolerations) {
    if (t.value("key", "") == toleration["key"]) return;
  }
  tolerations.push_back(toleration);
}

}  // namespace

std::string device_of(const JobSpec& spec, Role role) {
  // cpu and cuda are spelled as -c takes them.
  if (spec.device != Device::kAuto) return std::string(name_of(kDeviceNames, spec.device));
  return spec.count(role) > 0 && spec.replicas.at(role).gpus() > 0 ? "cuda" : "cpu";
}

std::string model_dir(const Job& job) {
  if (!job.run_dir.empty()) return job.run_dir;
  const auto& s = job.spec;
  if (s.checkpoint_store) {
    if (!s.resume_from.empty()) return s.resume_from;  // an s3:// run (parse_spec checked)
    auto uri = s.checkpoint_store->uri;
    while (!uri.empty() && uri.back() == '/') uri.pop_back();
    return uri + "/" + job.namespace_ + "/" + job.name + "-" + job.uid;
  }
  if (!s.resume_from.empty()) return checkpoint_path(s) + "/" + s.resume_from;
  return checkpoint_path(s) + "/" + job.namespace_ + "/" + job.name + "-" + job.uid;
}

bool uses_store(const JobSpec& spec, Role role, int index) {
  switch (role) {
    case Role::kPs:  // restores its shard from the checkpoints
    case Role::kEvaluator:
      return true;
    case Role::kMaster:
      return index == 0;
    case Role::kWorker:
      return index == 0 && spec.count(Role::kMaster) == 0;
  }
  return false;
}

std::string legacy_model_dir(const Job& job) { return checkpoint_path(job.spec) + "/" + job.name; }

std::string pod_name(const Job& job, Role role, int index) {
  return job.name + "-" + std::string(role_name(role)) + "-" + std::to_string(index);
}

std::string chief_name(const Job& job) {
  return job.spec.count(Role::kMaster) > 0 ? pod_name(job, Role::kMaster, 0)
                                           : pod_name(job, Role::kWorker, 0);
}

std::string pod_host(const Job& job, Role role, int index) {
  return pod_name(job, role, index) + "." + job.name + "." + job.namespace_ + ".svc";
}

std::string tf_config(const Job& job, Role role, int index) {
  json cluster = json::object();
  for (const auto r : kRoles) {
    const int n = job.spec.count(r);
    if (n == 0) continue;
    auto& addresses = cluster[std::string(role_name(r))] = json::array();
    for (int i = 0; i < n; ++i) {
      addresses.push_back(pod_host(job, r, i) + ":" + std::to_string(kGrpcPort.number));
    }
  }
  const json config = {{"cluster", cluster},
                       {"task", {{"type", std::string(role_name(role))}, {"index", index}}}};
  return config.dump();
}

std::vector<std::string> container_args(const Job& job, Role role) {
  const auto& s = job.spec;
  std::vector<std::string> a;
  auto add = [&a](contract::Flag f, std::string value) {
    a.emplace_back(f.name);
    a.push_back(std::move(value));
  };
  add(flag::kStrategy, s.parameter_server ? "ps" : "allreduce");
  add(flag::kModel, s.model);
  add(flag::kDataset, s.dataset);
  add(flag::kDataDir, data_path(s));
  add(flag::kModelDir, model_dir(job));
  add(flag::kEpochs, std::to_string(s.epochs));
  add(flag::kBatchSize, std::to_string(s.batch_size));
  add(flag::kOptimizer, s.optimizer);
  add(flag::kLearningRate, number(s.learning_rate));
  add(flag::kMomentum, number(s.momentum));
  add(flag::kWeightDecay, number(s.weight_decay));
  add(flag::kSchedule, s.schedule);
  add(flag::kWarmupEpochs, number(s.warmup_epochs));
  add(flag::kLabelSmoothing, number(s.label_smoothing));
  add(flag::kPrecision, name_of(kPrecisionNames, s.precision));
  add(flag::kSeed, std::to_string(s.seed));
  add(flag::kKeepCheckpoints, std::to_string(s.keep_checkpoints));
  add(flag::kMaxUnsavedSeconds, std::to_string(s.max_unsaved_seconds));
  add(flag::kMetricsPort, std::to_string(kMetricsPort.number));
  add(flag::kProgress, "lines");
  add(flag::kMetricsLinger, std::to_string(contract::kMetricsLingerSeconds));
  add(flag::kTerminationLog, std::string(contract::termination::kPath));
  if (!s.nesterov) a.emplace_back(flag::kNoNesterov.name);
  if (s.num_classes > 0) add(flag::kNumClasses, std::to_string(s.num_classes));
  if (s.checkpoint_every_steps > 0) {
    add(flag::kCheckpointEvery, std::to_string(s.checkpoint_every_steps));
  }
  if (s.download) {
    a.emplace_back(flag::kDownload.name);
    if (!s.download_mirror.empty()) add(flag::kDownloadMirror, s.download_mirror);
  }
  add(flag::kContext, device_of(s, role));
  if (s.parameter_server) {
    add(flag::kPsMode, s.ps_mode);
    if (s.staleness) add(flag::kStaleness, std::to_string(*s.staleness));
  } else {
    add(flag::kDistBackend, s.backend);
    add(flag::kBucketCapMb, number(s.bucket_cap_mb));
    if (!s.overlap) a.emplace_back(flag::kNoOverlap.name);
    if (s.collective_timeout_seconds) {
      add(flag::kDistTimeout, std::to_string(*s.collective_timeout_seconds));
    }
  }
  return a;
}

int pod_count(const JobSpec& spec) {
  int n = 0;
  for (const auto role : kRoles) n += spec.count(role);
  return n;
}

json job_labels(const Job& job) { return {{contract::label::kJobName, job.name}}; }

json replica_labels(const Job& job, Role role, int index) {
  auto labels = job_labels(job);
  labels[contract::label::kReplicaType] = std::string(role_name(role));
  labels[contract::label::kReplicaIndex] = std::to_string(index);
  return labels;
}

std::optional<Role> pod_role(const json& pod) {
  const auto metadata = pod.value("metadata", json::object());
  return contract::parse_role(
      metadata.value("labels", json::object()).value(contract::label::kReplicaType, ""));
}

json desired_service(const Job& job) {
  return {{"apiVersion", "v1"},
          {"kind", "Service"},
          {"metadata", owned_metadata(job, job.name)},
          {"spec",
           {{"clusterIP", "None"},
            {"publishNotReadyAddresses", true},
            {"selector", job_labels(job)},
            {"ports", json::array({service_port(kGrpcPort), service_port(kC10dStorePort),
                                   service_port(kMetricsPort)})}}}};
}

std::string token_secret_name(const Job& job) { return job.name + "-token"; }

json credentials_data(const security::JobCredentials& credentials) {
  return {{security::kCaFile, credentials.ca_certificate},
          {security::kCertificateFile, credentials.certificate},
          {security::kKeyFile, credentials.private_key}};
}

json desired_token_secret(const Job& job, const std::string& token,
                          const security::JobCredentials& credentials) {
  auto data = credentials_data(credentials);
  data["token"] = token;
  return {{"apiVersion", "v1"},
          {"kind", "Secret"},
          {"metadata", owned_metadata(job, token_secret_name(job))},
          {"type", "Opaque"},
          {"stringData", data}};
}

security::CertificateRequest job_certificate_request(const Job& job) {
  security::CertificateRequest request;
  request.common_name = job.namespace_ + "/" + job.name;
  const auto service = job.name + "." + job.namespace_ + ".svc";
  request.dns_names = {"*." + service, "*." + service + ".cluster.local"};
  return request;
}

json desired_network_policy(const Job& job) {
  return {{"apiVersion", "networking.k8s.io/v1"},
          {"kind", "NetworkPolicy"},
          {"metadata", owned_metadata(job, job.name)},
          {"spec",
           {{"podSelector", {{"matchLabels", job_labels(job)}}},
            {"policyTypes", json::array({"Ingress"})},
            {"ingress",
             json::array(
                 {{{"from", json::array({{{"podSelector", {{"matchLabels", job_labels(job)}}}}})}},
                  {{"ports",
                    json::array({{{"protocol", "TCP"}, {"port", kMetricsPort.number}}})}}})}}}};
}

json desired_pod(const Job& job, Role role, int index) {
  const auto& s = job.spec;
  const auto& replica = s.replicas.at(role);
  json env = json::array(
      {env_var(contract::env::kTfConfig, tf_config(job, role, index)),
       env_var(contract::env::kJobName, job.name),
       env_var(contract::env::kNamespace, job.namespace_),
       env_var(contract::env::kJobUid, job.uid),
       {{"name", contract::env::kPodName},
        {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.name"}}}}}},
       {{"name", contract::env::kPsToken},
        {"valueFrom", {{"secretKeyRef", {{"name", token_secret_name(job)}, {"key", "token"}}}}}}});
  if (!s.parameter_server && contract::is_trainer(role)) {
    const auto first = s.count(Role::kMaster) > 0 ? Role::kMaster : Role::kWorker;
    env.push_back(env_var(contract::env::kMasterAddr, pod_host(job, first, 0)));
    env.push_back(env_var(contract::env::kMasterPort, std::to_string(kC10dStorePort.number)));
    env.push_back(env_var(contract::env::kWorldSize,
                          std::to_string(s.count(Role::kMaster) + s.count(Role::kWorker))));
    env.push_back(env_var(contract::env::kRank, std::to_string(rank_of(s, role, index))));
    env.push_back(env_var(contract::env::kLocalRank, "0"));  // one rank per pod
  }
  if (s.checkpoint_store && uses_store(s, role, index)) {
    const auto& store = *s.checkpoint_store;
    for (const char* key : {contract::env::kAwsAccessKeyId, contract::env::kAwsSecretAccessKey}) {
      env.push_back(
          {{"name", key},
           {"valueFrom", {{"secretKeyRef", {{"name", store.credentials_secret}, {"key", key}}}}}});
    }
    if (!store.endpoint.empty())
      env.push_back(env_var(contract::env::kAwsEndpointUrl, store.endpoint));
    if (!store.region.empty()) env.push_back(env_var(contract::env::kAwsRegion, store.region));
    if (!store.addressing.empty()) {
      env.push_back(
          env_var(contract::env::kS3Addressing, store.addressing == "Path" ? "path" : "virtual"));
    }
    if (!store.ca_bundle_config_map.empty()) {
      env.push_back(
          env_var(contract::env::kAwsCaBundle, std::string(kStoreCaPath) + "/" + kStoreCaKey));
    }
  }
  json container = {
      {"name", "cifar-train"},
      {"image", s.image},
      {"command", json::array({"cifar-train"})},
      {"args", container_args(job, role)},
      {"env", env},
      {"ports", json::array({container_port(kGrpcPort), container_port(kC10dStorePort),
                             container_port(kMetricsPort)})},
      {"resources", replica.resources},
      // The runtime's final figures or error (contract/termination.h); a crash that left none
      // (a parse error, an abort) gives the end of its log instead.
      {"terminationMessagePolicy", "FallbackToLogsOnError"},
      {"volumeMounts", json::array({{{"name", "data"}, {"mountPath", data_path(s)}},
                                    {{"name", "tmp"}, {"mountPath", "/tmp"}}})},
      // Ready once the process serves its metrics: after its arguments and TF_CONFIG were read.
      {"readinessProbe",
       {{"tcpSocket", {{"port", kMetricsPort.name}}},
        {"periodSeconds", 2},
        {"failureThreshold", 3}}},
      // The restricted Pod Security Standard; the root filesystem is read-only, the volumes
      // (data, checkpoints, /tmp) are where the runtime writes.
      {"securityContext",
       {{"allowPrivilegeEscalation", false},
        {"readOnlyRootFilesystem", true},
        {"runAsNonRoot", true},
        {"capabilities", {{"drop", json::array({"ALL"})}}},
        {"seccompProfile", {{"type", "RuntimeDefault"}}}}}};
  json volumes = json::array();
  if (!s.checkpoint_store) {  // a volume for the run, or an emptyDir that keeps it for the pod
    auto& mounts = container["volumeMounts"];
    mounts.insert(mounts.begin(), json{{"name", "checkpoints"}, {"mountPath", checkpoint_path(s)}});
    volumes.push_back(
        s.checkpoint_volume
            ? json{{"name", "checkpoints"},
                   {"persistentVolumeClaim", {{"claimName", s.checkpoint_volume->claim_name}}}}
            : json{{"name", "checkpoints"}, {"emptyDir", json::object()}});
  }
  volumes.push_back(s.dataset_volume
                        ? json{{"name", "data"},
                               {"persistentVolumeClaim",
                                {{"claimName", s.dataset_volume->claim_name}, {"readOnly", true}}}}
                        : json{{"name", "data"}, {"emptyDir", json::object()}});
  volumes.push_back({{"name", "tmp"}, {"emptyDir", json::object()}});
  // A private CA of the store (checkpoint.s3.caBundleConfigMap), for the pods that use it.
  if (s.checkpoint_store && !s.checkpoint_store->ca_bundle_config_map.empty() &&
      uses_store(s, role, index)) {
    container["volumeMounts"].push_back(
        {{"name", "store-ca"}, {"mountPath", kStoreCaPath}, {"readOnly", true}});
    volumes.push_back(
        {{"name", "store-ca"},
         {"configMap",
          {{"name", s.checkpoint_store->ca_bundle_config_map},
           {"items", json::array({{{"key", kStoreCaKey}, {"path", kStoreCaKey}}})}}}});
  }

  if (uses_job_tls(s, role)) {
    container["env"].push_back(env_var(contract::env::kTlsDir, kTlsPath));
    container["volumeMounts"].push_back(
        {{"name", "job-tls"}, {"mountPath", kTlsPath}, {"readOnly", true}});
    json items = json::array();
    for (const char* key : {security::kCaFile, security::kCertificateFile, security::kKeyFile}) {
      items.push_back({{"key", key}, {"path", key}});
    }
    // Readable by whoever the container runs as (a template may name another user and no
    // fsGroup): the container is the job's process alone.
    volumes.push_back(
        {{"name", "job-tls"},
         {"secret",
          {{"secretName", token_secret_name(job)}, {"items", items}, {"defaultMode", 0444}}}});
  }

  // The template first, the job's own fields over it: names, labels, env and the container are
  // what the other replicas rely on, so a template cannot change them.
  json pod = {{"apiVersion", "v1"}, {"kind", "Pod"}};
  pod["metadata"] = replica.pod_template.value("metadata", json::object());
  pod["spec"] = replica.pod_template.value("spec", json::object());
  auto& metadata = pod["metadata"];
  metadata["name"] = pod_name(job, role, index);
  metadata["namespace"] = job.namespace_;
  if (!metadata.contains("labels")) metadata["labels"] = json::object();
  metadata["labels"].update(replica_labels(job, role, index));
  metadata["ownerReferences"] = json::array({owner_reference(job)});
  if (!s.queue.empty()) join_pod_group(job, metadata);
  auto& spec = pod["spec"];
  spec["hostname"] = pod_name(job, role, index);
  spec["subdomain"] = job.name;
  // The kubelet restarts in place only for OnFailure; Never and ExitCode pods are recreated
  // (or not) by the operator, which counts them against backoffLimit.
  spec["restartPolicy"] = s.restart_policy == RestartPolicy::kOnFailure ? "OnFailure" : "Never";
  // Non-root by default (the images' user); a template may name another non-root user.
  if (!spec.contains("securityContext")) {
    spec["securityContext"] = {{"runAsNonRoot", true},
                               {"runAsUser", kRuntimeUser},
                               {"runAsGroup", kRuntimeUser},
                               {"fsGroup", kRuntimeUser},
                               {"seccompProfile", {{"type", "RuntimeDefault"}}}};
  }
  // A GPU pod tolerates the taint that keeps other pods off GPU nodes (what the
  // ExtendedResourceToleration admission plugin adds, where a cluster enables it).
  if (replica.gpus() > 0) tolerate(spec, gpu_toleration());
  // Training pods never call the API: no service account token in them unless a template asks.
  if (!spec.contains("automountServiceAccountToken")) spec["automountServiceAccountToken"] = false;
  // Spread over nodes: one node's death takes as little of the job as it can. Nodes tainted
  // against the pod (an unreachable one) are left out, so that a replacement can still be placed.
  if (s.spread_across_nodes != NodeSpread::kNone && !spec.contains("topologySpreadConstraints")) {
    spec["topologySpreadConstraints"] = json::array(
        {{{"maxSkew", 1},
          {"topologyKey", "kubernetes.io/hostname"},
          {"whenUnsatisfiable",
           s.spread_across_nodes == NodeSpread::kRequired ? "DoNotSchedule" : "ScheduleAnyway"},
          {"labelSelector", {{"matchLabels", job_labels(job)}}},
          {"nodeTaintsPolicy", "Honor"}}});
  }
  if (!s.scheduler_name.empty()) spec["schedulerName"] = s.scheduler_name;
  if (!s.priority_class.empty()) spec["priorityClassName"] = s.priority_class;
  spec["containers"] = json::array({container});
  if (!spec.contains("volumes")) spec["volumes"] = json::array();
  for (auto& v : volumes) spec["volumes"].push_back(v);
  return pod;
}

void stamp_incarnation(json& pod, int64_t incarnation) {
  const auto number = std::to_string(incarnation);
  pod["metadata"]["annotations"][contract::label::kIncarnationAnnotation] = number;
  for (auto& container : pod["spec"]["containers"]) {
    container["env"].push_back(env_var(contract::env::kIncarnation, number));
  }
}

void stamp_chief_incarnation(json& pod, int64_t chief_incarnation) {
  for (auto& container : pod["spec"]["containers"]) {
    container["env"].push_back(
        env_var(contract::env::kChiefIncarnation, std::to_string(chief_incarnation)));
  }
}

void stamp_ps_incarnations(json& pod, const std::vector<int64_t>& incarnations) {
  std::string list;
  for (const auto number : incarnations) {
    list += (list.empty() ? "" : ",") + std::to_string(number);
  }
  for (auto& container : pod["spec"]["containers"]) {
    container["env"].push_back(env_var(contract::env::kPsIncarnations, list));
  }
}

int64_t incarnation_of(const json& pod) {
  const auto annotations = pod["metadata"].value("annotations", json::object());
  const auto value = annotations.value(contract::label::kIncarnationAnnotation, "");
  int64_t number = 0;
  std::from_chars(value.data(), value.data() + value.size(), number);
  return number;
}

std::vector<json> desired_pods(const Job& job) {
  std::vector<json> pods;
  for (const auto role : kRoles) {
    for (int i = 0; i < job.spec.count(role); ++i) pods.push_back(desired_pod(job, role, i));
  }
  return pods;
}

}  // namespace cifar::op
