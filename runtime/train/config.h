// Everything a training run is configured by; filled from the command line (cli/) or, in the
// distributed issues, from the operator's env. No torch here, so the CLI compiles fast.
#pragma once

#include <cstdint>
#include <string>

#include "cluster/cluster.h"
#include "contract/ports.h"
#include "distributed/allreduce/options.h"
#include "distributed/ps/options.h"
#include "train/enum_names.h"

namespace cifar::train {

enum class ScheduleKind { kConstant, kStep, kCosine, kOneCycle };
inline constexpr EnumNames<ScheduleKind, 4> kScheduleNames{{
    {"constant", ScheduleKind::kConstant},
    {"step", ScheduleKind::kStep},
    {"cosine", ScheduleKind::kCosine},
    {"onecycle", ScheduleKind::kOneCycle},
}};

struct ScheduleOptions {
  ScheduleKind kind = ScheduleKind::kCosine;
  double base_lr = 0.05;
  double warmup_epochs = 0;  // linear ramp from 0 (all kinds but one-cycle, which has its own)
  double step_epochs = 30;   // kStep: multiply by `gamma` every `step_epochs`
  double gamma = 0.1;
  double final_lr_fraction = 0;  // kCosine / kOneCycle: lr at the end as a fraction of base_lr
  double one_cycle_peak_fraction = 0.25;  // kOneCycle: where the peak sits in the run
};

enum class OptimizerKind { kSgd, kAdam };
inline constexpr EnumNames<OptimizerKind, 2> kOptimizerNames{{
    {"sgd", OptimizerKind::kSgd},
    {"adam", OptimizerKind::kAdam},
}};

struct OptimizerOptions {
  OptimizerKind kind = OptimizerKind::kSgd;
  double momentum = 0.9;
  bool nesterov = true;
  double weight_decay = 5e-4;
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.999;
};

// The floating-point type of the forward pass (weights, gradients and optimizer state stay fp32).
enum class Precision { kAuto, kFp32, kBf16, kFp16 };
inline constexpr EnumNames<Precision, 4> kPrecisionNames{{
    {"auto", Precision::kAuto},  // bf16 on a GPU that has it, fp32 elsewhere
    {"fp32", Precision::kFp32},
    {"bf16", Precision::kBf16},
    {"fp16", Precision::kFp16},
}};

enum class Strategy { kParameterServer, kAllReduce };
inline constexpr EnumNames<Strategy, 2> kStrategyNames{{
    {"ps", Strategy::kParameterServer},
    {"allreduce", Strategy::kAllReduce},
}};

// Each strategy owns its options (distributed/<strategy>/options.h); this holds them for the CLI.
struct DistributedOptions {
  bool enabled = false;
  Strategy strategy = Strategy::kParameterServer;
  cluster::Job job;
  bool local = false;  // from the local flags: each process offsets its metrics port
  ps::Options ps;
  allreduce::Options allreduce;
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
  int64_t test_limit = 0;       // evaluate on only the first N test images (0 = all)
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
  Precision precision = Precision::kAuto;
  int threads = 0;  // intra-op threads; 0 = all cores
  int loader_workers = 2;
  int64_t max_steps = 0;  // stop after this many steps in total (0 = run all epochs)
  // Checkpoints.
  int64_t checkpoint_every_steps = 0;  // besides the end of every epoch (0 = epochs only)
  int keep_checkpoints = 3;
  bool resume = false;
  // Reporting.
  int metrics_port = contract::kMetricsPort.number;  // -1: no endpoint; 0: a free port
  std::string metrics_bind = "0.0.0.0";
  int metrics_linger = 0;  // seconds the endpoint stays up after a divergence, for a last scrape
  std::string termination_log;    // where the final figures or the error go as it exits ("": none)
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
