// The environment the operator gives every pod and the runtime reads. Arrays of char, so that
// they serve std::getenv/setenv and JSON alike.
#pragma once

namespace cifar::contract::env {

// {"cluster": {"<role>": ["host:port", ...]}, "task": {"type": "<role>", "index": i}}
inline constexpr char kTfConfig[] = "TF_CONFIG";
// The job's shared secret: parameter servers refuse calls without it.
inline constexpr char kPsToken[] = "CIFAR_PS_TOKEN";
// The directory of the job's TLS credentials (ca.crt, tls.crt, tls.key: the operator mounts the
// job's CA and the pod's role's certificate and key there, from the job's Secret): the
// parameter-server channel is mutual TLS with them (--tls-dir).
inline constexpr char kTlsDir[] = "CIFAR_TLS_DIR";
// Who the pod is, for logs (the runtime's metric labels come from TF_CONFIG).
inline constexpr char kJobName[] = "CIFAR_JOB_NAME";
inline constexpr char kNamespace[] = "CIFAR_NAMESPACE";
inline constexpr char kPodName[] = "POD_NAME";
// The pod's incarnation: a number the operator gives every pod it creates, larger than any it gave
// before in the job (status.incarnation), so that a replacement outranks a pod of the same role
// left running on a cut-off node; the run's writers fence their writes with it (train/fence.h).
// Unset (or 0): no fence.
inline constexpr char kIncarnation[] = "CIFAR_INCARNATION";
// The job's UID: incarnations are numbered per job, so a fence record names the job whose number
// it holds, and a job that continues another's run (checkpoint.resumeFrom) takes the run over
// instead of finding itself "replaced" by the other job's higher numbers.
inline constexpr char kJobUid[] = "CIFAR_JOB_UID";
// The incarnation of the job's chief as this pod is created (its own number when the chief is
// created in the same round). A parameter server created with its chief claims the run for their
// incarnation before it restores from the run's checkpoints, so that an old chief left running
// with an old parameter server on a cut-off node writes nothing after that restore.
inline constexpr char kChiefIncarnation[] = "CIFAR_CHIEF_INCARNATION";
// The incarnations of the job's parameter servers as this trainer is created, comma-separated by
// PS index ("3,2"): the trainer refuses to train against an older PS (one left running on a
// cut-off node while its replacement serves). Trainers of parameter-server jobs only.
inline constexpr char kPsIncarnations[] = "CIFAR_PS_INCARNATIONS";
// All-reduce ranks, as torch.distributed names them (trainers of all-reduce jobs only).
inline constexpr char kMasterAddr[] = "MASTER_ADDR";
inline constexpr char kMasterPort[] = "MASTER_PORT";
inline constexpr char kWorldSize[] = "WORLD_SIZE";
inline constexpr char kRank[] = "RANK";
inline constexpr char kLocalRank[] = "LOCAL_RANK";
// The run's object store (checkpoint.uri), for the pods that read or write it, named as every S3
// tool names them; the keys come from checkpoint.s3.credentialsSecret under the same names.
inline constexpr char kAwsAccessKeyId[] = "AWS_ACCESS_KEY_ID";
inline constexpr char kAwsSecretAccessKey[] = "AWS_SECRET_ACCESS_KEY";
inline constexpr char kAwsEndpointUrl[] = "AWS_ENDPOINT_URL";
inline constexpr char kAwsEndpointUrlS3[] = "AWS_ENDPOINT_URL_S3";
inline constexpr char kAwsRegion[] = "AWS_REGION";
inline constexpr char kAwsDefaultRegion[] = "AWS_DEFAULT_REGION";
inline constexpr char kS3Addressing[] = "CIFAR_S3_ADDRESSING";  // path or virtual
inline constexpr char kAwsCaBundle[] = "AWS_CA_BUNDLE";         // a private CA's PEM for https

}  // namespace cifar::contract::env
