// Everything a training run is configured by, filled from the command line (cli/) and the
// operator's env. The roles take it whole; a helper takes only the part it reads (the headers
// beside this one). No torch here, so the CLI compiles fast.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cluster/cluster.h"
#include "config/allreduce_options.h"
#include "config/optimizer_options.h"
#include "config/precision.h"
#include "config/ps_options.h"
#include "config/schedule_options.h"
#include "contract/enum_names.h"
#include "contract/ports.h"

namespace cifar::train {

enum class Strategy { kParameterServer, kAllReduce };
inline constexpr contract::EnumNames<Strategy, 2> kStrategyNames{{
    {"ps", Strategy::kParameterServer},
    {"allreduce", Strategy::kAllReduce},
}};

// Each strategy has its options (config/<strategy>_options.h); this holds them for the CLI.
struct DistributedOptions {
  bool enabled = false;
  Strategy strategy = Strategy::kParameterServer;
  cluster::Job job;
  bool local = false;  // from the local flags: each process offsets its metrics port
  ps::Options ps;
  allreduce::Options allreduce;

  // An elastic all-reduce job (--min-ranks): its world, and so its rank 0, changes from round to
  // round.
  [[nodiscard]] bool elastic() const {
    return enabled && strategy == Strategy::kAllReduce && allreduce.min_world_size > 0;
  }
  // Whether this process is the job's chief, which alone writes the run: rank 0 of an all-reduce
  // job (whatever TF_CONFIG calls it: in a job of workers only, rank 1 is "worker 0" there), the
  // master of a parameter-server job (or worker 0 without one), a process training alone. In an
  // elastic job every trainer may be: the chief is each round's rank 0.
  [[nodiscard]] bool chief() const {
    if (!enabled) return true;
    if (strategy == Strategy::kAllReduce)
      return job.is_trainer() && (elastic() || allreduce.rank == 0);
    return job.is_chief();
  }
  // Who this process is in a job's logs and reports: "rank 1" for an all-reduce trainer,
  // "worker 0", "ps 1", "evaluator 0" otherwise; "trainer" alone.
  [[nodiscard]] std::string who() const {
    if (!enabled) return "trainer";
    if (strategy == Strategy::kAllReduce && job.is_trainer()) {
      // An elastic job's ranks change places from round to round: its processes are slots.
      return (elastic() ? "slot " : "rank ") + std::to_string(allreduce.rank);
    }
    return job.task_name();
  }
  // Whether this process reads or writes the run's store: the chief by its strategy's rule
  // (chief()), the members that train nothing by the contract's (contract::uses_store: the
  // evaluator, a parameter server).
  [[nodiscard]] bool uses_store() const {
    return chief() ||
           (enabled && !job.is_trainer() &&
            contract::uses_store(job.role, job.index, !job.cluster.master.empty(), elastic()));
  }
};

struct TrainConfig {
  // What to train.
  std::string model = "simplecnn";
  std::string model_dir = "model/simplecnn";  // checkpoints, monitor.jsonl
  std::string name;                           // run name (checkpoint prefix, metrics job label)
  int64_t num_classes = 10;
  // Data.
  std::string dataset = "cifar10";  // one of train/datasets.h's dataset_names()
  std::string data_dir;             // empty: the dataset's default
  bool download = false;
  std::string download_mirror;  // replaces the official archive's base URL
  // s3://BUCKET/PREFIX: the dataset's files in object storage, fetched into data_dir first
  // (data/s3_fetch.h), with the store settings the checkpoints use.
  std::string data_uri;
  int64_t train_limit = 0;  // use only the first N training images (0 = all)
  int64_t test_limit = 0;   // evaluate on only the first N test images (0 = all)
  int64_t synthetic_train_size = 5000;
  int64_t synthetic_test_size = 1000;
  bool augment = true;
  // Optimisation.
  int64_t epochs = 100;
  int64_t batch_size = 64;
  // All-reduce: the samples of one step over all ranks (0: batch_size x the world), each rank
  // taking its share of them, so that the world can change and the steps do not
  // (docs/ARCHITECTURE.md, "Elastic jobs").
  int64_t global_batch = 0;
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
  // How long the run's object store may stay away (refusing, silent, failing DNS, 5xx) before the
  // job gives up: checkpoints wait to be saved meanwhile, and training goes on.
  int max_unsaved_seconds = 600;
  bool resume = false;
  // Reporting.
  int metrics_port = contract::kMetricsPort.number;  // -1: no endpoint; 0: a free port
  std::string metrics_bind = "0.0.0.0";
  int metrics_linger = 0;  // seconds the endpoint stays up after a divergence, for a last scrape
  // A trainer with no progress for this long reports a stall (health/watchdog.h; 0: the limit is
  // derived from its pace, -1: no watchdog).
  double stall_seconds = 0;
  // ... and at least this long until its first step: start-up is no step.
  double stall_startup_seconds = 300;
  // The pod's incarnation (env CIFAR_INCARNATION; 0: none), which fences the run's writes
  // against an older pod of the same role (train/fence.h).
  int64_t incarnation = 0;
  // The job it belongs to (env CIFAR_JOB_UID; "": run by hand): whose incarnations these are.
  std::string job_uid;
  // The chief's incarnation as this pod was created (env CIFAR_CHIEF_INCARNATION; 0: unknown): a
  // parameter server created with its chief claims the run for them before it restores.
  int64_t chief_incarnation = 0;
  // The parameter servers' incarnations as this trainer was created, by PS index (env
  // CIFAR_PS_INCARNATIONS; empty: unknown): it trains against none older
  // (distributed/ps/membership.h).
  std::vector<int64_t> ps_incarnations;
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
