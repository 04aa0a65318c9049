// What a CifarTrainJob should consist of, as pure functions of the job (docs/ARCHITECTURE.md,
// "The runtime–operator contract"): one headless Service and a pod per replica. The
// reconcile compares these with what it observes; nothing here talks to a server.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "api/job.h"
#include "security/certificates.h"

namespace cifar::op {

// The non-root user of the runtime image (Dockerfile): pods run as it unless a template says.
inline constexpr int kRuntimeUser = 65532;

// "<job>-<role>-<index>", the pod's name and hostname.
std::string pod_name(const Job& job, Role role, int index);
// The chief's pod, whose success is the job's: the master's, or worker 0's without a master.
std::string chief_name(const Job& job);
// "<job>.<namespace>.svc": the job's headless Service, under which its pods' hostnames resolve.
std::string service_domain(const Job& job);
// "<job>-<role>-<index>.<job>.<namespace>.svc": a peer's DNS name through the headless Service.
std::string pod_host(const Job& job, Role role, int index);

// The replicas of `role` a pod may be: its count, but an elastic job's workers maxReplicas (the
// world its pods are told of, whatever the desired size now).
int slots(const JobSpec& spec, Role role);
// An elastic job's rendezvous store (docs/ARCHITECTURE.md, "Elastic jobs"): "<job>-rendezvous", a
// pod of its own that no worker's loss takes with it, where the workers meet in rounds; and its
// DNS name under the job's headless Service, the workers' MASTER_ADDR.
std::string rendezvous_store_name(const Job& job);
std::string rendezvous_store_host(const Job& job);
nlohmann::json desired_rendezvous_store(const Job& job);
// Whether `pod` (one of the job's) is its rendezvous store.
bool is_rendezvous_store(const nlohmann::json& pod);

// The TF_CONFIG of replica (role, index): every role's addresses (grpc port), then this task.
std::string tf_config(const Job& job, Role role, int index);

// cifar-train's arguments for the job's spec (the same for every replica: the role comes from
// TF_CONFIG, ranks from the PyTorch env).
std::vector<std::string> container_args(const Job& job, Role role);
// cifar-train's -c for the replicas of `role`: training.device, auto resolved by their GPUs.
std::string device_of(const JobSpec& spec, Role role);
// The run's model dir as the pods see it: its own directory on the checkpoint volume,
// <path>/<namespace>/<name>-<uid>, so that a job deleted and applied again under the same name
// (or one of the same name in another namespace on a shared volume) starts a run of its own;
// <path>/<checkpoint.resumeFrom> to continue an earlier run on purpose. With checkpoint.uri:
// <uri>/<namespace>/<name>-<uid>, or checkpoint.resumeFrom's s3:// URI.
std::string model_dir(const Job& job);
// Whether replica (role, index) reads or writes the run's store, and so gets checkpoint.s3's
// credentials: the chief (master 0, or worker 0 without a master; an all-reduce job's rank 0),
// a parameter server (it restores its shard from the checkpoints), the evaluator; with
// dataset.uri, every pod that reads data (all but a parameter server).
bool uses_store(const JobSpec& spec, Role role, int index);
// Where operators before status.modelDir put a job's run: <path>/<name>.
std::string legacy_model_dir(const Job& job);

// The job's pods, all replicas together: the size of its Kueue pod group (kueue_integration.h).
int pod_count(const JobSpec& spec);

// The labels every object of the job carries, and the selector of one replica's pod.
nlohmann::json job_labels(const Job& job);
nlohmann::json replica_labels(const Job& job, Role role, int index);
// The role a pod's replica_labels give it; nullopt for a pod without one (not the operator's).
std::optional<Role> pod_role(const nlohmann::json& pod);
// The index a pod's replica_labels give it; nullopt for a pod without one or with one that is not
// a number.
std::optional<int> pod_index(const nlohmann::json& pod);

// The job's headless Service. It carries kPerRoleCredentialsAnnotation: the job's Secret holds
// per-role credentials (a Service without it is of an older operator's job, whose Secret has one
// certificate for all: Job::shared_credentials).
nlohmann::json desired_service(const Job& job);
inline constexpr char kPerRoleCredentialsAnnotation[] = "cifartrain.io/ps-credentials";
// Whether `service` (the job's) says its Secret holds per-role credentials.
bool has_per_role_credentials(const nlohmann::json& service);
// "<job>-token": the Secret whose `token` a parameter-server job's PS and trainers get as
// CIFAR_PS_TOKEN, and whose credentials they mount at CIFAR_TLS_DIR (ca.crt, and as tls.crt and
// tls.key their role's: ps.crt/ps.key for the PS, trainer.crt/trainer.key for the trainers), so
// that only the job's trainers can call its parameter servers, over mutual TLS, and no trainer can
// pose as one. Token and credentials are the caller's (random), made once with the Secret and
// never rotated while it lives; the CA's key is kept nowhere.
std::string token_secret_name(const Job& job);
struct CredentialKeys {
  const char* certificate;
  const char* key;
};
inline constexpr CredentialKeys kPsCredentialKeys{"ps.crt", "ps.key"};
inline constexpr CredentialKeys kTrainerCredentialKeys{"trainer.crt", "trainer.key"};
nlohmann::json desired_token_secret(const Job& job, const std::string& token,
                                    const security::JobIdentities& identities);
// What the job's certificates name: the PS's, every pod's DNS name under the job's headless
// Service (<job>-<role>-<i>.<job>.<namespace>.svc[.cluster.local], as TF_CONFIG names the PS).
security::CertificateRequest job_certificate_request(const Job& job);
// Admits the job's own pods to every port of its pods (gRPC, the c10d store, and Gloo's pair
// connections on ephemeral ports), and anyone to the metrics port (Prometheus, the operator); lets
// the pods reach what they need and nothing else: each other, DNS (port 53), and the port of the
// checkpoint store (checkpoint.s3.endpoint's, else 443) and of the dataset's download mirror. So a
// job runs in a namespace whose default policy denies all traffic, and its pods reach nothing
// besides.
nlohmann::json desired_network_policy(const Job& job);
// The port of an http(s) URL: its own, else its scheme's (http 80, https 443); an empty URL,
// the default endpoint's (https: 443).
int url_port(const std::string& url);
nlohmann::json desired_pod(const Job& job, Role role, int index);
// Every replica's pod, PS first, then master, workers, evaluator.
std::vector<nlohmann::json> desired_pods(const Job& job);
// Gives `pod` (a desired pod) incarnation `incarnation`: env CIFAR_INCARNATION, and the annotation
// cifartrain.io/incarnation for whoever reads the pod.
void stamp_incarnation(nlohmann::json& pod, int64_t incarnation);
// Keeps `pod` (a desired pod) off `nodes` (the job's suspect nodes): a required node affinity
// term "kubernetes.io/hostname NotIn nodes", added to each of its template's terms (which are
// ORed). Nothing for no nodes.
void avoid_nodes(nlohmann::json& pod, const std::vector<std::string>& nodes);
// Tells `pod` (a desired pod) the chief's incarnation: env CIFAR_CHIEF_INCARNATION.
void stamp_chief_incarnation(nlohmann::json& pod, int64_t chief_incarnation);
// Tells `pod` (a desired trainer of a PS job) the parameter servers' incarnations, by index: env
// CIFAR_PS_INCARNATIONS ("3,2").
void stamp_ps_incarnations(nlohmann::json& pod, const std::vector<int64_t>& incarnations);
// A pod's incarnation, from its annotation (0: none, or not a number).
int64_t incarnation_of(const nlohmann::json& pod);

}  // namespace cifar::op
