// The labels the operator puts on a job's objects: every object its job's name, every pod also
// its role and index. The operator's informers and progress scraper select and read by them, and
// the monitoring reads them too: Prometheus keeps the pods that carry kJobName and relabels the
// three into cifartrain_job, replica_type and replica_index (deploy/prometheus/prometheus.yml,
// the Helm chart's PodMonitor), which the alert rules and the Grafana dashboard select by. The
// runtime never sees them. Arrays of char, so that they serve as JSON keys and in selectors alike.
#pragma once

namespace cifar::contract::label {

inline constexpr char kJobName[] = "cifartrain.io/job-name";            // <job>
inline constexpr char kReplicaType[] = "cifartrain.io/replica-type";    // role_name (roles.h)
inline constexpr char kReplicaIndex[] = "cifartrain.io/replica-index";  // 0, 1, ...
// A pod of the job that is no replica: an elastic job's rendezvous store (kRendezvousStore).
inline constexpr char kComponent[] = "cifartrain.io/component";
inline constexpr char kRendezvousStore[] = "rendezvous-store";
// An annotation, not a label: the pod's incarnation (env.h, kIncarnation), for people and tools.
inline constexpr char kIncarnationAnnotation[] = "cifartrain.io/incarnation";

}  // namespace cifar::contract::label
