#include "cifartrainjob/desired_state.h"

#include <charconv>
#include <sstream>
#include <system_error>

#include "api/group_version.h"
#include "cifartrainjob/kueue_integration.h"
#include "cifartrainjob/object_parts.h"
#include "contract/env.h"
#include "contract/flags.h"
#include "contract/labels.h"
#include "contract/ports.h"
#include "contract/termination.h"
#include "contract/whole_number.h"
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

// The metadata of an object the job owns (Service, Secret, NetworkPolicy): garbage-collected with
// it.
json owned_metadata(const Job& job, const std::string& name) {
  return {{"name", name},
          {"namespace", job.namespace_},
          {"labels", job_labels(job)},
          {"ownerReferences", json::array({owner_reference(job)})}};
}

json service_port(contract::NamedPort port) { return {{"name", port.name}, {"port", port.number}}; }

}  // namespace

json owner_reference(const Job& job) {
  return {{"apiVersion", kApiVersion}, {"kind", kKind},
          {"name", job.name},          {"uid", job.uid},
          {"controller", true},        {"blockOwnerDeletion", true}};
}

json env_var(const std::string& name, const std::string& value) {
  return {{"name", name}, {"value", value}};
}

std::string data_path(const JobSpec& spec) {
  return spec.dataset_volume ? spec.dataset_volume->path : "/data";  // else an emptyDir
}

std::string checkpoint_path(const JobSpec& spec) {
  return spec.checkpoint_volume ? spec.checkpoint_volume->path : "/checkpoints";
}

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
  // A dataset in the store is read by every pod that reads data: all but a parameter server.
  return contract::uses_store(role, index, spec.count(Role::kMaster) > 0,
                              spec.elastic_allreduce()) ||
         (!spec.dataset_uri.empty() && role != Role::kPs);
}

std::string legacy_model_dir(const Job& job) { return checkpoint_path(job.spec) + "/" + job.name; }

std::string pod_name(const Job& job, Role role, int index) {
  return job.name + "-" + std::string(role_name(role)) + "-" + std::to_string(index);
}

std::string chief_name(const Job& job) {
  return job.spec.count(Role::kMaster) > 0 ? pod_name(job, Role::kMaster, 0)
                                           : pod_name(job, Role::kWorker, 0);
}

std::string service_domain(const Job& job) { return job.name + "." + job.namespace_ + ".svc"; }

std::string pod_host(const Job& job, Role role, int index) {
  return pod_name(job, role, index) + "." + service_domain(job);
}

int slots(const JobSpec& spec, Role role) {
  return role == Role::kWorker && spec.elastic() ? spec.replicas.at(role).max_replicas
                                                 : spec.count(role);
}

std::string rendezvous_store_name(const Job& job) { return job.name + "-rendezvous"; }

std::string rendezvous_store_host(const Job& job) {
  return rendezvous_store_name(job) + "." + service_domain(job);
}

std::string tf_config(const Job& job, Role role, int index) {
  json cluster = json::object();
  for (const auto r : kRoles) {
    const int n = slots(job.spec, r);
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
  // A parameter server reads no data.
  if (!s.dataset_uri.empty() && role != Role::kPs) add(flag::kDataUri, s.dataset_uri);
  add(flag::kContext, device_of(s, role));
  // The trainers' stall limit (a PS and an evaluator wait for trainers by design); 0 is off,
  // which the runtime spells -1 (its 0 is "derive it").
  if (s.stall_timeout_seconds && is_trainer(role)) {
    add(flag::kStallSeconds,
        *s.stall_timeout_seconds == 0 ? "-1" : std::to_string(*s.stall_timeout_seconds));
  }
  if (s.stall_startup_seconds && is_trainer(role)) {
    add(flag::kStallStartupSeconds, std::to_string(*s.stall_startup_seconds));
  }
  if (s.parameter_server) {
    add(flag::kPsMode, s.ps_mode);
    if (s.staleness) add(flag::kStaleness, std::to_string(*s.staleness));
    // An elastic job's trainers: the master and at least minReplicas workers.
    if (s.elastic() && is_trainer(role)) {
      add(flag::kMinTrainers, std::to_string(1 + s.replicas.at(Role::kWorker).min_replicas));
    }
  } else {
    add(flag::kDistBackend, s.backend);
    add(flag::kBucketCapMb, number(s.bucket_cap_mb));
    if (!s.overlap) a.emplace_back(flag::kNoOverlap.name);
    if (s.collective_timeout_seconds) {
      add(flag::kDistTimeout, std::to_string(*s.collective_timeout_seconds));
    }
    if (s.elastic() && is_trainer(role)) {
      add(flag::kMinRanks, std::to_string(s.replicas.at(Role::kWorker).min_replicas));
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

std::optional<int> pod_index(const json& pod) {
  const auto label = pod.value("metadata", json::object())
                         .value("labels", json::object())
                         .value(contract::label::kReplicaIndex, "");
  int index = 0;
  const auto parsed = std::from_chars(label.data(), label.data() + label.size(), index);
  if (parsed.ec != std::errc()) return std::nullopt;
  return index;
}

json desired_service(const Job& job) {
  auto metadata = owned_metadata(job, job.name);
  metadata["annotations"][kPerRoleCredentialsAnnotation] = "per-role";
  return {{"apiVersion", "v1"},
          {"kind", "Service"},
          {"metadata", metadata},
          {"spec",
           {{"clusterIP", "None"},
            {"publishNotReadyAddresses", true},
            {"selector", job_labels(job)},
            {"ports", json::array({service_port(kGrpcPort), service_port(kC10dStorePort),
                                   service_port(kMetricsPort)})}}}};
}

bool has_per_role_credentials(const json& service) {
  return service.value("metadata", json::object())
             .value("annotations", json::object())
             .value(kPerRoleCredentialsAnnotation, "") == "per-role";
}

std::string token_secret_name(const Job& job) { return job.name + "-token"; }

json desired_token_secret(const Job& job, const std::string& token,
                          const security::JobIdentities& identities) {
  const auto& ps = identities.parameter_server;
  const auto& trainer = identities.trainer;
  return {{"apiVersion", "v1"},
          {"kind", "Secret"},
          {"metadata", owned_metadata(job, token_secret_name(job))},
          {"type", "Opaque"},
          {"stringData",
           {{"token", token},
            {security::kCaFile, ps.ca_certificate},
            {kPsCredentialKeys.certificate, ps.certificate},
            {kPsCredentialKeys.key, ps.private_key},
            {kTrainerCredentialKeys.certificate, trainer.certificate},
            {kTrainerCredentialKeys.key, trainer.private_key}}}};
}

security::CertificateRequest job_certificate_request(const Job& job) {
  security::CertificateRequest request;
  request.common_name = job.namespace_ + "/" + job.name;
  const auto service = service_domain(job);
  request.dns_names = {"*." + service, "*." + service + ".cluster.local"};
  return request;
}

int url_port(const std::string& url) {
  const auto scheme_end = url.find("://");
  const auto host_start = scheme_end == std::string::npos ? 0 : scheme_end + 3;
  const auto host_end = url.find('/', host_start);
  const auto authority = url.substr(
      host_start, host_end == std::string::npos ? std::string::npos : host_end - host_start);
  const auto colon = authority.rfind(':');
  if (colon != std::string::npos && authority.find(']', colon) == std::string::npos) {
    if (const auto port = contract::whole_number<int>(authority.substr(colon + 1))) return *port;
  }
  return url.rfind("http://", 0) == 0 ? 80 : 443;
}

json desired_network_policy(const Job& job) {
  const auto own_pods = json::array({{{"podSelector", {{"matchLabels", job_labels(job)}}}}});
  const auto tcp = [](int port) { return json{{"protocol", "TCP"}, {"port", port}}; };
  json egress =
      json::array({{{"to", own_pods}},
                   {{"ports", json::array({{{"protocol", "UDP"}, {"port", 53}}, tcp(53)})}}});
  // A NetworkPolicy names no hosts: the store's and the dataset mirror's ports, anywhere.
  if (job.spec.checkpoint_store) {
    const auto& endpoint = job.spec.checkpoint_store->endpoint;
    egress.push_back({{"ports", json::array({tcp(url_port(endpoint))})}});
  }
  if (job.spec.download) {
    const auto& mirror = job.spec.download_mirror;
    egress.push_back({{"ports", json::array({tcp(url_port(mirror))})}});
  }
  return {{"apiVersion", "networking.k8s.io/v1"},
          {"kind", "NetworkPolicy"},
          {"metadata", owned_metadata(job, job.name)},
          {"spec",
           {{"podSelector", {{"matchLabels", job_labels(job)}}},
            {"policyTypes", json::array({"Ingress", "Egress"})},
            {"ingress", json::array({{{"from", own_pods}},
                                     {{"ports", json::array({tcp(kMetricsPort.number)})}}})},
            {"egress", egress}}}};
}

void stamp_incarnation(json& pod, int64_t incarnation) {
  const auto number = std::to_string(incarnation);
  pod["metadata"]["annotations"][contract::label::kIncarnationAnnotation] = number;
  for (auto& container : pod["spec"]["containers"]) {
    container["env"].push_back(env_var(contract::env::kIncarnation, number));
  }
}

void avoid_nodes(json& pod, const std::vector<std::string>& nodes) {
  if (nodes.empty()) return;
  const json not_on = {{"key", "kubernetes.io/hostname"}, {"operator", "NotIn"}, {"values", nodes}};
  auto& terms = pod["spec"]["affinity"]["nodeAffinity"]
                   ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"];
  if (!terms.is_array() || terms.empty()) terms = json::array({json::object()});
  for (auto& term : terms) term["matchExpressions"].push_back(not_on);
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
  return contract::whole_number(value).value_or(0);
}

std::vector<json> desired_pods(const Job& job) {
  std::vector<json> pods;
  for (const auto role : kRoles) {
    for (int i = 0; i < job.spec.count(role); ++i) pods.push_back(desired_pod(job, role, i));
  }
  return pods;
}

}  // namespace cifar::op
