// Everything a training run is configured by; filled from the command line (cli/) or, in the
// distributed issues, from the operator's env. No torch here, so the CLI compiles fast.
#pragma once

#include <cstdint>
#include <string>

#include "cluster/cluster.h"
#include "contract/ports.h"

namespace cifar::train {

enum class ScheduleKind { kConstant, kStep, kCosine, kOneCycle };

struct ScheduleOptions {
  ScheduleKind kind = ScheduleKind::kCosine;
  double base_lr = 0.05;
  double warmup_epochs = 0;  // linear ramp from 0 (all kinds but one-cycle, which has its own)
  double step_epochs = 30;   // kStep: multiply by `gamma` every `step_epochs`
  double gamma = 0.1;
  double final_lr_fraction = 0;  // kCosine / kOneCycle: lr at the end as a fraction of base_lr
  double one_cycle_peak_fraction = 0.25;  // kOneCycle: where the peak sits in the run
};

struct OptimizerOptions {
  std::string name = "sgd";  // sgd | adam
  double momentum = 0.9;
  bool nesterov = true;
  double weight_decay = 5e-4;
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.999;
};

// Parameter-server training (docs/ARCHITECTURE.md, "Parameter server").
struct PsOptions {
  std::string mode = "sync";        // sync | async | async-reply | hogwild | ssp
  int64_t staleness = 3;            // ssp: how many updates a trainer may run ahead of the slowest
  bool staleness_lr = false;        // divide the learning rate of a stale gradient by its staleness
  double timeout_seconds = 30;      // sync/ssp: a trainer silent this long leaves the round
  std::string wire_dtype = "fp32";  // fp32 | fp16 | bf16 for gradients and parameters
  int stripes = 0;  // per PS (distributed/ps/layout.h); 0: one per 256 KiB of its share
  int64_t max_message_mb = 512;  // larger gRPC messages are refused
  double retry_seconds = 120;    // how long a trainer retries an unreachable PS
  std::string token;  // shared secret of the job's members (env CIFAR_PS_TOKEN); empty: none
};

// All-reduce data parallelism (c10d): who this rank is and how gradients are reduced.
struct AllReduceOptions {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;                     // among the ranks on this machine (launch, mpirun)
  std::string master_addr = "127.0.0.1";  // rank 0's host: the c10d TCPStore
  int master_port = contract::kC10dStorePort.number;
  std::string backend = "auto";  // auto (nccl on cuda, else gloo) | gloo | nccl
  double bucket_cap_mb = 25;
  double first_bucket_mb = 1;         // small, so the first all-reduce starts early in backward
  bool overlap = true;                // all-reduce buckets during backward (false: after it)
  double timeout_seconds = 60;        // a collective waiting longer fails: a rank died or hangs
  int64_t verify_replicas_every = 0;  // steps between bitwise checks that ranks agree (0: never)
};

struct DistributedOptions {
  bool enabled = false;
  std::string strategy = "ps";  // ps | allreduce
  cluster::Job job;
  bool local = false;  // from the local flags: each process offsets its metrics port
  PsOptions ps;
  AllReduceOptions allreduce;
};

struct TrainConfig {
  // What to train.
  std::string model = "simplecnn";
  std::string model_dir = "model/simplecnn";  // checkpoints, monitor.jsonl
  std::string name;                           // run name (checkpoint prefix, metrics job label)
  int64_t num_classes = 10;
  // Data.
  std::string dataset = "cifar10";  // cifar10 | cifar100 | fashion-mnist | synthetic
  std::string data_dir;             // empty: a per-dataset default
  bool download = false;
  std::string download_mirror;  // replaces the official archive's base URL
  int64_t train_limit = 0;      // use only the first N training images (0 = all)
  int64_t synthetic_train_size = 5000;
  int64_t synthetic_test_size = 1000;
  bool augment = true;
  // Optimisation.
  int64_t epochs = 100;
  int64_t batch_size = 64;
  OptimizerOptions optimizer;
  ScheduleOptions schedule;
  double label_smoothing = 0;
  uint64_t seed = 1;
  // Execution.
  std::string device = "cpu";  // cpu | cuda
  int threads = 0;             // intra-op threads; 0 = all cores
  int loader_workers = 2;
  int64_t max_steps = 0;  // stop after this many steps in total (0 = run all epochs)
  // Checkpoints.
  int64_t checkpoint_every_steps = 0;  // besides the end of every epoch (0 = epochs only)
  int keep_checkpoints = 3;
  bool resume = false;
  // Reporting.
  int metrics_port = contract::kMetricsPort.number;  // -1: no endpoint; 0: a free port
  std::string metrics_bind = "0.0.0.0";
  std::string progress = "auto";  // auto | bar | lines | none
  int64_t log_every_steps = 0;    // plain-line progress interval (0 = ~10 lines an epoch)
  // Distributed training (off: single process).
  DistributedOptions distributed;
};

// The run's name: the checkpoints' prefix and the metrics' job label.
inline std::string run_name(const TrainConfig& config) {
  return config.name.empty() ? config.model : config.name;
}

}  // namespace cifar::train
