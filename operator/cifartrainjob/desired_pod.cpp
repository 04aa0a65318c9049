// desired_pod (desired_state.h): one replica's pod, put together from one function per concern:
// the env that says who it is and where its peers are, the runtime's container, the run's volumes,
// access to the checkpoint store, the job's TLS credentials, the user's template, the defaults a
// pod gets unless the template says otherwise, and where it may be placed.
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "cifartrainjob/desired_state.h"
#include "cifartrainjob/kueue_integration.h"
#include "cifartrainjob/object_parts.h"
#include "contract/env.h"
#include "contract/labels.h"
#include "contract/ports.h"
#include "contract/roles.h"
#include "security/tls_dir.h"

namespace cifar::op {
namespace {

using contract::kC10dStorePort;
using contract::kGrpcPort;
using contract::kMetricsPort;
using nlohmann::json;

// Where a pod that uses the store finds checkpoint.s3.caBundleConfigMap's CA bundle, under the
// key Kubernetes' own CA ConfigMaps use (kube-root-ca.crt).
constexpr const char* kStoreCaPath = "/etc/cifartrain/store-ca";
constexpr const char* kStoreCaKey = "ca.crt";
// Where a parameter-server job's PS and trainers find the job's credentials (CIFAR_TLS_DIR).
constexpr const char* kTlsPath = "/etc/cifartrain/tls";

json container_port(contract::NamedPort port) {
  return {{"name", port.name}, {"containerPort", port.number}};
}

// All-reduce ranks: the master (if any) is rank 0, the workers follow in index order.
int rank_of(const JobSpec& spec, Role role, int index) {
  return role == Role::kMaster ? index : spec.count(Role::kMaster) + index;
}

// The members of a parameter-server job's PS channel, its PS and trainers: they alone get the job's
// token and TLS credentials (its evaluator reads checkpoints and calls no PS; an all-reduce job
// has no PS, and no TLS in LibTorch).
bool on_ps_channel(const JobSpec& spec, Role role) {
  return spec.parameter_server && (role == Role::kPs || contract::is_trainer(role));
}

// Who the pod is and where its peers are: TF_CONFIG, the job's names, the PS token (a member of
// the PS channel), and for an all-reduce trainer the PyTorch rendezvous variables.
json identity_env(const Job& job, Role role, int index) {
  const auto& s = job.spec;
  json env = json::array({env_var(contract::env::kTfConfig, tf_config(job, role, index)),
                          env_var(contract::env::kJobName, job.name),
                          env_var(contract::env::kNamespace, job.namespace_),
                          env_var(contract::env::kJobUid, job.uid),
                          {{"name", contract::env::kPodName},
                           {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.name"}}}}}}});
  if (on_ps_channel(s, role)) {
    env.push_back(
        {{"name", contract::env::kPsToken},
         {"valueFrom", {{"secretKeyRef", {{"name", token_secret_name(job)}, {"key", "token"}}}}}});
  }
  if (!s.parameter_server && contract::is_trainer(role)) {
    // A fixed job meets at rank 0's store, its world the whole job; an elastic one at its own
    // store pod, its world the most workers it may have and RANK the pod's slot (the rank of each
    // round is the order the slots joined it in).
    const auto first = s.count(Role::kMaster) > 0 ? Role::kMaster : Role::kWorker;
    env.push_back(env_var(contract::env::kMasterAddr,
                          s.elastic() ? rendezvous_store_host(job) : pod_host(job, first, 0)));
    env.push_back(env_var(contract::env::kMasterPort, std::to_string(kC10dStorePort.number)));
    env.push_back(env_var(contract::env::kWorldSize,
                          std::to_string(slots(s, Role::kMaster) + slots(s, Role::kWorker))));
    env.push_back(env_var(contract::env::kRank, std::to_string(rank_of(s, role, index))));
    env.push_back(env_var(contract::env::kLocalRank, "0"));  // one rank per pod
  }
  return env;
}

// The restricted Pod Security Standard for a container, with a read-only root filesystem.
json restricted_container() {
  return {{"allowPrivilegeEscalation", false},
          {"readOnlyRootFilesystem", true},
          {"runAsNonRoot", true},
          {"capabilities", {{"drop", json::array({"ALL"})}}},
          {"seccompProfile", {{"type", "RuntimeDefault"}}}};
}

// The runtime's container: the image, its arguments, ports, resources, readiness and the
// restricted Pod Security Standard.
json runtime_container(const Job& job, Role role, int index) {
  const auto& s = job.spec;
  return {{"name", "cifar-train"},
          {"image", s.image},
          {"command", json::array({"cifar-train"})},
          {"args", container_args(job, role)},
          {"env", identity_env(job, role, index)},
          {"ports", json::array({container_port(kGrpcPort), container_port(kC10dStorePort),
                                 container_port(kMetricsPort)})},
          {"resources", s.replicas.at(role).resources},
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
          // The root filesystem is read-only; the volumes (data, checkpoints, /tmp) are where the
          // runtime writes.
          {"securityContext", restricted_container()}};
}

// The emptyDir the dataset lands in: fetched from dataset.uri, at most the official CIFAR binary
// files (184 MB for either; the fetch refuses a larger file), and a third more for the filesystem
// and the sidecars; downloaded, the archive and what it unpacks, unbounded as before.
json data_cache(const JobSpec& s) {
  if (s.dataset_uri.empty()) return json::object();
  return {{"sizeLimit", "256Mi"}};
}

// The checkpoints (unless they go to a store: the volume, or an emptyDir that keeps them for the
// pod), the dataset (its volume, read-only, or an emptyDir) and /tmp.
void add_run_volumes(const JobSpec& s, json& container, json& volumes) {
  if (!s.checkpoint_store) {
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
                        : json{{"name", "data"}, {"emptyDir", data_cache(s)}});
  volumes.push_back({{"name", "tmp"}, {"emptyDir", json::object()}});
}

// checkpoint.s3 for the pods that use the store (uses_store): its credentials, endpoint, region,
// addressing and private CA (checkpoint.s3.caBundleConfigMap).
void add_store_access(const JobSpec& s, Role role, int index, json& container, json& volumes) {
  if (!s.checkpoint_store || !uses_store(s, role, index)) return;
  const auto& store = *s.checkpoint_store;
  auto& env = container["env"];
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
  if (store.ca_bundle_config_map.empty()) return;
  env.push_back(
      env_var(contract::env::kAwsCaBundle, std::string(kStoreCaPath) + "/" + kStoreCaKey));
  container["volumeMounts"].push_back(
      {{"name", "store-ca"}, {"mountPath", kStoreCaPath}, {"readOnly", true}});
  volumes.push_back({{"name", "store-ca"},
                     {"configMap",
                      {{"name", store.ca_bundle_config_map},
                       {"items", json::array({{{"key", kStoreCaKey}, {"path", kStoreCaKey}}})}}}});
}

// The job's TLS credentials for the members of its parameter-server channel: each its role's.
void add_job_tls(const Job& job, Role role, json& container, json& volumes) {
  if (!on_ps_channel(job.spec, role)) return;
  container["env"].push_back(env_var(contract::env::kTlsDir, kTlsPath));
  container["volumeMounts"].push_back(
      {{"name", "job-tls"}, {"mountPath", kTlsPath}, {"readOnly", true}});
  // The role's certificate and key under the names the runtime reads (security/tls_dir.h).
  const auto& own = role == Role::kPs ? kPsCredentialKeys : kTrainerCredentialKeys;
  const auto [certificate, key] =
      job.shared_credentials ? CredentialKeys{security::kCertificateFile, security::kKeyFile} : own;
  const json items = {{{"key", security::kCaFile}, {"path", security::kCaFile}},
                      {{"key", certificate}, {"path", security::kCertificateFile}},
                      {{"key", key}, {"path", security::kKeyFile}}};
  // Readable by whoever the container runs as (a template may name another user and no fsGroup):
  // the container is the job's process alone.
  volumes.push_back(
      {{"name", "job-tls"},
       {"secret",
        {{"secretName", token_secret_name(job)}, {"items", items}, {"defaultMode", 0444}}}});
}

// The replica's template, with the job's own metadata over it: names, labels, owner and pod
// group are what the other replicas rely on, so a template cannot change them.
json pod_from_template(const Job& job, Role role, int index) {
  const auto& replica = job.spec.replicas.at(role);
  json pod = {{"apiVersion", "v1"}, {"kind", "Pod"}};
  pod["metadata"] = replica.pod_template.value("metadata", json::object());
  pod["spec"] = replica.pod_template.value("spec", json::object());
  auto& metadata = pod["metadata"];
  metadata["name"] = pod_name(job, role, index);
  metadata["namespace"] = job.namespace_;
  if (!metadata.contains("labels")) metadata["labels"] = json::object();
  metadata["labels"].update(replica_labels(job, role, index));
  metadata["ownerReferences"] = json::array({owner_reference(job)});
  if (!job.spec.queue.empty()) {
    join_pod_group(job, role == Role::kWorker ? std::optional<int>(index) : std::nullopt, metadata);
  }
  pod["spec"]["hostname"] = pod_name(job, role, index);
  pod["spec"]["subdomain"] = job.name;
  return pod;
}

// What a pod gets unless its template says otherwise: the restart policy the job's asks for, a
// non-root user, and no service account token.
void apply_pod_defaults(const JobSpec& s, json& spec) {
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
  // Training pods never call the API: no service account token in them unless a template asks.
  if (!spec.contains("automountServiceAccountToken")) spec["automountServiceAccountToken"] = false;
}

// Tolerates the taint GPU nodes are commonly given (nvidia.com/gpu, any value, NoSchedule), unless
// the template tolerates its key already.
void tolerate_gpu_nodes(json& spec) {
  const json toleration = {{"key", kGpuResource}, {"operator", "Exists"}, {"effect", "NoSchedule"}};
  auto& tolerations = spec["tolerations"];
  if (tolerations.is_null()) tolerations = json::array();
  for (const auto& t : tolerations) {
    if (t.value("key", "") == toleration["key"]) return;
  }
  tolerations.push_back(toleration);
}

// Where the pod may go: GPU nodes for a GPU pod, spread over nodes, the job's scheduler and
// priority.
void apply_placement(const Job& job, Role role, json& spec) {
  const auto& s = job.spec;
  // What the ExtendedResourceToleration admission plugin adds, where a cluster enables it.
  if (s.replicas.at(role).gpus() > 0) tolerate_gpu_nodes(spec);
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
}

}  // namespace

json desired_rendezvous_store(const Job& job) {
  const auto& s = job.spec;
  const auto name = rendezvous_store_name(job);
  auto labels = job_labels(job);
  labels[contract::label::kComponent] = contract::label::kRendezvousStore;
  json pod = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata",
               {{"name", name},
                {"namespace", job.namespace_},
                {"labels", labels},
                {"ownerReferences", json::array({owner_reference(job)})}}}};
  // The workers' template's placement and pull secrets, not their resources: the store is small.
  const auto& worker = s.replicas.at(Role::kWorker).pod_template.value("spec", json::object());
  json spec = json::object();
  for (const char* key : {"imagePullSecrets", "nodeSelector", "tolerations", "affinity"}) {
    if (worker.contains(key)) spec[key] = worker[key];
  }
  spec["hostname"] = name;
  spec["subdomain"] = job.name;
  apply_pod_defaults(s, spec);
  // A server: the kubelet restarts it whatever it ended with (the workers ride out its absence,
  // and a restarted store's rounds outrank the old one's: rendezvous_keys.h); deleted with the job.
  spec["restartPolicy"] = "Always";
  if (!s.scheduler_name.empty()) spec["schedulerName"] = s.scheduler_name;
  if (!s.priority_class.empty()) spec["priorityClassName"] = s.priority_class;
  spec["containers"] = json::array(
      {{{"name", "rendezvous-store"},
        {"image", s.image},
        {"command", json::array({"cifar-train"})},
        {"args",
         json::array({"rendezvous-store", "--port", std::to_string(kC10dStorePort.number)})},
        {"ports", json::array({container_port(kC10dStorePort)})},
        {"resources", {{"requests", {{"cpu", "50m"}, {"memory", "128Mi"}}}}},
        // No readiness probe: the job's NetworkPolicy admits only its own pods to this port, not
        // the kubelet; the workers retry until the store answers.
        {"securityContext", restricted_container()}}});
  pod["spec"] = std::move(spec);
  // Part of the job's own Kueue group: the workers cannot train without it.
  if (!s.queue.empty()) join_pod_group(job, std::nullopt, pod["metadata"]);
  return pod;
}

bool is_rendezvous_store(const json& pod) {
  return pod.value("metadata", json::object())
             .value("labels", json::object())
             .value(contract::label::kComponent, "") == contract::label::kRendezvousStore;
}

json desired_pod(const Job& job, Role role, int index) {
  auto container = runtime_container(job, role, index);
  json volumes = json::array();
  add_run_volumes(job.spec, container, volumes);
  add_store_access(job.spec, role, index, container, volumes);
  add_job_tls(job, role, container, volumes);

  auto pod = pod_from_template(job, role, index);
  auto& spec = pod["spec"];
  apply_pod_defaults(job.spec, spec);
  apply_placement(job, role, spec);
  spec["containers"] = json::array({container});
  if (!spec.contains("volumes")) spec["volumes"] = json::array();
  for (auto& volume : volumes) spec["volumes"].push_back(volume);
  return pod;
}

}  // namespace cifar::op
