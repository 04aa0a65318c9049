#include "cli/options.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cluster/cluster.h"
#include "cluster/ranks.h"
#include "contract/env.h"
#include "contract/exit_codes.h"
#include "contract/flags.h"
#include "contract/whole_number.h"
#include "models/model.h"
#include "storage/s3_location.h"
#include "train/datasets.h"

namespace cifar::cli {
namespace {

namespace flag = contract::flag;
using contract::cli_names;

// What is wrong with an s3://BUCKET/PREFIX ("" when nothing), as a CLI11 check says it.
std::string s3_uri_problem(const std::string& uri) {
  try {
    static_cast<void>(storage::parse_s3_uri(uri));
    return "";
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
}

// The seed projects use two-letter single-dash flags (-md, -nc), which CLI11 (like getopt) reads
// as bundles of one-letter flags; they are renamed to their long forms before parsing.
std::vector<std::string> seed_compatible_args(int argc, const char* const argv[]) {
  static const std::map<std::string, std::string> kRenames = {
      {"-md", std::string(flag::kModelDir.name)}, {"-nc", std::string(flag::kNumClasses.name)}};
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    for (const auto& [seed, long_form] : kRenames) {
      if (arg == seed) {
        arg = long_form;
      } else if (arg.rfind(seed + "=", 0) == 0) {
        arg = long_form + arg.substr(seed.size());
      }
    }
    args.push_back(std::move(arg));
  }
  std::reverse(args.begin(), args.end());  // CLI11 takes them last-first
  return args;
}

// An option that is one of `names` on the command line and their enum in the config: the help
// shows it like any other choice ("TEXT:{a,b}=default"), and only the names are accepted.
template <typename Enum, size_t N>
CLI::Option* add_choice(CLI::App& app, const std::string& flags, Enum& value,
                        const contract::EnumNames<Enum, N>& names, const std::string& help) {
  const std::string shown = "{" + contract::list_names(names, ",") + "}";
  CLI::Validator to_enum(
      [names, shown](std::string& input) -> std::string {
        const auto found = contract::find_named(names, CLI::detail::to_lower(input));
        if (!found) return "'" + input + "' is not one of " + shown;
        input = std::to_string(static_cast<int>(*found));  // CLI11 reads an enum as its number
        return {};
      },
      shown);
  return app.add_option(flags, value, help)
      ->type_name("TEXT")
      ->transform(to_enum)
      ->default_str(contract::name_of(names, value));
}

std::vector<std::string> role_names() {
  std::vector<std::string> names;
  names.reserve(contract::kRoles.size());
  for (const auto role : contract::kRoles) names.emplace_back(contract::role_name(role));
  return names;
}

// Flags of a distributed job; turned into config.distributed after parsing.
struct DistributedFlags {
  bool distributed = false;
  cluster::LocalFlags local;
};

void add_distributed_options(CLI::App& app, train::TrainConfig& c, DistributedFlags& d) {
  auto& ps = c.distributed.ps;
  const char* group = "Distributed (local flags; in Kubernetes the operator's TF_CONFIG)";
  app.add_flag("--distributed", d.distributed,
               "Play one role of a local distributed job (ports from --dist-start-port)")
      ->group(group);
  app.add_option("--dist-type", d.local.type, "Role: ps, master, worker, evaluator")
      ->check(CLI::IsMember(role_names()))
      ->group(group)
      ->capture_default_str();
  app.add_option("--ps-count", d.local.ps_count, "PS shards")
      ->check(CLI::PositiveNumber)
      ->group(group)
      ->capture_default_str();
  app.add_option("--worker-count", d.local.worker_count, "Workers besides the master")
      ->check(CLI::NonNegativeNumber)
      ->group(group)
      ->capture_default_str();
  app.add_option("--dist-start-port", d.local.start_port,
                 "First port: ps i at +i, the master after them, then the workers")
      ->check(CLI::Range(1, 65535))
      ->group(group)
      ->capture_default_str();
  app.add_option("--ps-index", d.local.ps_index, "This PS's index")
      ->check(CLI::NonNegativeNumber)
      ->group(group);
  app.add_option("--worker-index", d.local.worker_index, "This worker's index")
      ->check(CLI::NonNegativeNumber)
      ->group(group);
  app.add_option("--dist-host", d.local.host, "Host of every process of a local job")
      ->group(group)
      ->capture_default_str();
  add_choice(app, cli_names(flag::kStrategy), c.distributed.strategy, train::kStrategyNames,
             "Distributed strategy: ps (parameter server), allreduce (data parallel, c10d)")
      ->group(group);
  auto& ar = c.distributed.allreduce;
  const char* ar_group = "All-reduce (ranks from MASTER_ADDR/WORLD_SIZE/RANK, TF_CONFIG or mpirun)";
  add_choice(app, cli_names(flag::kDistBackend), ar.backend, allreduce::kBackendNames,
             "c10d backend: auto (nccl on cuda, else gloo)")
      ->group(ar_group);
  app.add_option(cli_names(flag::kBucketCapMb), ar.bucket_cap_mb, "Gradient bucket size")
      ->check(CLI::PositiveNumber)
      ->group(ar_group)
      ->capture_default_str();
  app.add_option("--first-bucket-mb", ar.first_bucket_mb,
                 "Size of the first bucket (the last layers' gradients, ready first)")
      ->check(CLI::PositiveNumber)
      ->group(ar_group)
      ->capture_default_str();
  app.add_flag("!" + cli_names(flag::kNoOverlap), ar.overlap,
               "All-reduce the gradients after backward instead of during it")
      ->group(ar_group);
  app.add_option(cli_names(flag::kDistTimeout), ar.timeout_seconds,
                 "Seconds a collective may wait for the other ranks before they count as lost")
      ->check(CLI::PositiveNumber)
      ->group(ar_group)
      ->capture_default_str();
  app.add_option("--rendezvous-timeout", ar.rendezvous_timeout_seconds,
                 "Seconds a rank waits for every rank to join its group: at the start, and for a "
                 "lost rank's replacement (then the job fails)")
      ->check(CLI::PositiveNumber)
      ->group(ar_group)
      ->capture_default_str();
  app.add_option(
         "--min-ranks", ar.min_world_size,
         "An elastic job: trains with any number of ranks from this to WORLD_SIZE, going on "
         "without a rank that is lost and taking in ranks that come at a step boundary; "
         "the ranks meet at a store of their own (cifar-train rendezvous-store at "
         "MASTER_ADDR:MASTER_PORT) and a step covers --global-batch samples (default: "
         "--batch-size x WORLD_SIZE) whatever their number")
      ->check(CLI::PositiveNumber)
      ->group(ar_group);
  app.add_option("--rendezvous-settle", ar.settle_seconds,
                 "An elastic job: seconds a round with at least --min-ranks ranks waits for more "
                 "after the last one joined")
      ->check(CLI::PositiveNumber)
      ->group(ar_group)
      ->capture_default_str();
  app.add_option("--verify-replicas-every", ar.verify_replicas_every,
                 "Check every N steps that all ranks hold bit-identical parameters and buffers "
                 "(one small all-reduce of a digest; 0: never)")
      ->check(CLI::NonNegativeNumber)
      ->group(ar_group)
      ->capture_default_str();
  add_choice(app, cli_names(flag::kPsMode), ps.mode, ps::kModeNames,
             "sync, async (apply then reply), async-reply (reply then apply), hogwild "
             "(lock-free), ssp (bounded staleness)")
      ->group(group);
  app.add_option(cli_names(flag::kStaleness), ps.staleness,
                 "ssp: updates a trainer may run ahead of the slowest")
      ->check(CLI::NonNegativeNumber)
      ->group(group)
      ->capture_default_str();
  app.add_flag("--staleness-lr", ps.staleness_lr,
               "Divide the learning rate of a gradient k updates stale by k")
      ->group(group);
  app.add_option(cli_names(flag::kMinTrainers), ps.min_trainers,
                 "An elastic job: trainers (the master and workers) join and leave as they come "
                 "and go, and a sync update takes at least this many; TF_CONFIG lists the most "
                 "workers there can be")
      ->check(CLI::PositiveNumber)
      ->group(group);
  app.add_option("--ps-timeout", ps.timeout_seconds,
                 "sync/ssp: a trainer silent this long (seconds) is dropped from the round")
      ->check(CLI::PositiveNumber)
      ->group(group)
      ->capture_default_str();
  add_choice(app, "--ps-wire-dtype", ps.wire_dtype, ps::kWireDTypeNames,
             "Gradients and parameters on the wire")
      ->group(group);
  app.add_option("--ps-stripes", ps.stripes,
                 "Connections (stripes) per PS that each trainer spreads a PS's share over; 0: "
                 "one per 256 KiB of the share, at most 4. Every process of a job needs the same")
      ->check(CLI::Range(0, cifar::ps::kMaxStripes))
      ->group(group)
      ->capture_default_str();
  app.add_option("--ps-max-message-mb", ps.max_message_mb, "Largest gRPC message accepted")
      ->check(CLI::Range(1, 2047))
      ->group(group)
      ->capture_default_str();
  app.add_option("--ps-retry-seconds", ps.retry_seconds,
                 "How long a trainer retries an unreachable PS before failing")
      ->check(CLI::PositiveNumber)
      ->group(group)
      ->capture_default_str();
  app.add_option(cli_names(flag::kTlsDir), ps.tls_dir,
                 "The job's TLS credentials (ca.crt, tls.crt, tls.key; `cifar-train certs` makes "
                 "them): the channel between trainers and parameter servers is mutual TLS")
      ->envname(contract::env::kTlsDir)
      ->group(group);
  app.add_flag(cli_names(flag::kInsecure), ps.insecure,
               "The parameter-server channel in plaintext, without TLS (benchmarks)")
      ->group(group);
}

// --strategy allreduce: this process's rank (an evaluator task of TF_CONFIG evaluates).
void resolve_allreduce(train::DistributedOptions& dist, const char* tf_config) {
  std::optional<cluster::Job> tf_job;
  if (tf_config != nullptr && *tf_config != '\0') tf_job = cluster::parse_tf_config(tf_config);
  dist.enabled = true;
  if (tf_job && tf_job->role == cluster::Role::kEvaluator) {
    dist.job = *tf_job;
    return;
  }
  const auto ranks =
      cluster::ranks_from_env([](const char* name) { return std::getenv(name); }, tf_job);
  if (!ranks) {
    throw std::invalid_argument(
        "--strategy allreduce needs this process's rank: run it under 'cifar-train launch -n N', "
        "under mpirun, or set MASTER_ADDR, MASTER_PORT, WORLD_SIZE and RANK (or TF_CONFIG)");
  }
  auto& ar = dist.allreduce;
  ar.rank = ranks->rank;
  ar.world_size = ranks->world_size;
  ar.local_rank = ranks->local_rank;
  ar.master_addr = ranks->master_addr;
  ar.master_port = ranks->master_port;
  // Rank 0 plays the master (checkpoints, reports), the others are workers 0..n-2.
  dist.job = tf_job ? *tf_job : cluster::Job{};
  dist.job.role = ar.rank == 0 ? cluster::Role::kMaster : cluster::Role::kWorker;
  dist.job.index = ar.rank == 0 ? 0 : ar.rank - 1;
}

// Fills config.distributed from the local flags or TF_CONFIG; throws std::invalid_argument.
void resolve_distributed(const CLI::App& app, const DistributedFlags& d, train::TrainConfig& c) {
  auto& dist = c.distributed;
  const char* tf_config = std::getenv(contract::env::kTfConfig);
  if (dist.strategy == train::Strategy::kAllReduce) {
    resolve_allreduce(dist, tf_config);
    const auto& ar = dist.allreduce;
    if (!dist.job.is_trainer()) return;  // the evaluator: no rank, no batch
    if (app.count("--rendezvous-settle") > 0 && ar.min_world_size == 0) {
      throw std::invalid_argument("--rendezvous-settle needs --min-ranks (an elastic job)");
    }
    if (ar.min_world_size > ar.world_size) {
      throw std::invalid_argument("--min-ranks " + std::to_string(ar.min_world_size) +
                                  " is more than the ranks of the job (WORLD_SIZE " +
                                  std::to_string(ar.world_size) + ")");
    }
    // An elastic job's steps do not depend on how many ranks it has: the global batch is that of
    // the largest world.
    if (ar.min_world_size > 0 && c.global_batch == 0) c.global_batch = c.batch_size * ar.world_size;
    if (c.global_batch != 0 && c.global_batch < dist.allreduce.world_size) {
      throw std::invalid_argument("--global-batch " + std::to_string(c.global_batch) +
                                  " is smaller than the world (" +
                                  std::to_string(dist.allreduce.world_size) +
                                  " ranks): every rank needs a sample in every step");
    }
    return;
  }
  if (c.global_batch != 0) {
    throw std::invalid_argument(
        "--global-batch needs --strategy allreduce (a parameter-server trainer's batch is "
        "--batch-size)");
  }
  if (dist.allreduce.min_world_size != 0) {
    throw std::invalid_argument("--min-ranks needs --strategy allreduce");
  }
  if (d.distributed) {
    dist.job = cluster::local_job(d.local);
    dist.local = true;
  } else if (tf_config != nullptr && *tf_config != '\0') {
    dist.job = cluster::parse_tf_config(tf_config);
  } else {
    for (const char* flag : {"--dist-type", "--ps-index", "--worker-index"}) {
      if (app.count(flag) > 0) {
        throw std::invalid_argument(std::string(flag) +
                                    " needs --distributed (or TF_CONFIG in the environment)");
      }
    }
    return;
  }
  dist.enabled = true;
  if (dist.job.cluster.ps.empty()) {
    throw std::invalid_argument("the parameter-server strategy needs at least one ps in the job");
  }
  if (const char* token = std::getenv(contract::env::kPsToken)) dist.ps.token = token;
  if (dist.ps.min_trainers > 0 && dist.job.is_trainer()) {
    const int most = dist.job.trainer_count();
    if (dist.ps.min_trainers > most) {
      throw std::invalid_argument("--min-trainers " + std::to_string(dist.ps.min_trainers) +
                                  " is more than the job's trainers (" + std::to_string(most) +
                                  ": the master and the workers TF_CONFIG lists)");
    }
    // An elastic synchronous job's updates do not depend on how many trainers it has: the global
    // batch is that of all of them.
    if (dist.ps.mode == ps::Mode::kSync) c.global_batch = c.batch_size * most;
  }
}

void add_options(CLI::App& app, train::TrainConfig& c, std::string& context, bool& verbose) {
  app.get_formatter()->column_width(36);
  // As with getopt, a repeated option takes its last value, so wrappers can append overrides.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);

  app.add_option(cli_names(flag::kModel), c.model, "Network to train")
      ->check(CLI::IsMember(models::model_names()))
      ->capture_default_str();
  app.add_option(cli_names(flag::kModelDir), c.model_dir,
                 "Where checkpoints and monitor.jsonl go: a directory, or s3://BUCKET/PREFIX "
                 "(with AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL, AWS_REGION; "
                 "seed flag: -md)")
      ->check(
          [](const std::string& location) {
            return storage::is_s3_uri(location) ? s3_uri_problem(location) : std::string();
          },
          "DIR or s3://BUCKET/PREFIX")
      ->capture_default_str();
  app.add_option(cli_names(flag::kNumClasses), c.num_classes,
                 "Number of classes (seed flag: -nc); 20 or 100 select CIFAR-100's coarse or "
                 "fine labels")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("-n,--name", c.name,
                 "Run name: checkpoint prefix and metrics job label "
                 "(default: the model name)");
  app.add_option(cli_names(flag::kEpochs), c.epochs, "Epochs to train")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option(cli_names(flag::kBatchSize), c.batch_size, "Batch size")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--global-batch", c.global_batch,
                 "--strategy allreduce: the samples of one step over all ranks, shared out among "
                 "them whatever their number (default: --batch-size x the ranks)")
      ->check(CLI::PositiveNumber);
  app.add_option(cli_names(flag::kContext), context,
                 "Device: cpu, cuda (cudnn is accepted for cuda)")
      ->check(CLI::IsMember({"cpu", "cuda", "cudnn"}))
      ->capture_default_str();

  add_choice(app, cli_names(flag::kPrecision), c.precision, train::kPrecisionNames,
             "Forward-pass precision (autocast; weights stay fp32): auto is bf16 on a GPU with "
             "bf16, fp32 elsewhere; bf16 also runs on the CPU");

  app.add_option(cli_names(flag::kDataset), c.dataset, "Dataset")
      ->check(CLI::IsMember(train::dataset_names()))
      ->capture_default_str();
  app.add_option(cli_names(flag::kDataDir), c.data_dir,
                 "Dataset directory (default: data/<dataset>; Debian's files for fashion-mnist; "
                 "<model-dir>/synthetic-data for synthetic)");
  auto* download =
      app.add_flag(cli_names(flag::kDownload), c.download,
                   "Download the official CIFAR archive into --data-dir if missing (MD5-checked)");
  app.add_option(cli_names(flag::kDownloadMirror), c.download_mirror,
                 "Base URL that replaces the official archive's (air-gapped clusters)");
  app.add_option(cli_names(flag::kDataUri), c.data_uri,
                 "s3://BUCKET/PREFIX: the CIFAR binary files in object storage (the store's "
                 "settings and keys as for -md s3://...), fetched once into --data-dir")
      ->check(s3_uri_problem, "s3://BUCKET/PREFIX")
      ->excludes(download);
  app.add_option("--train-limit", c.train_limit, "Use only the first N training images")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--test-limit", c.test_limit, "Evaluate on only the first N test images")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--synthetic-train-size", c.synthetic_train_size, "Synthetic training images")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--synthetic-test-size", c.synthetic_test_size, "Synthetic test images")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_flag("!--no-augment", c.augment, "Disable random crop and flip");

  auto& o = c.optimizer;
  add_choice(app, cli_names(flag::kOptimizer), o.kind, train::kOptimizerNames, "Optimizer");
  app.add_option(cli_names(flag::kLearningRate), c.schedule.base_lr, "Base (peak) learning rate")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option(cli_names(flag::kMomentum), o.momentum, "SGD momentum")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_flag("!" + cli_names(flag::kNoNesterov), o.nesterov,
               "Plain instead of Nesterov momentum");
  app.add_option(cli_names(flag::kWeightDecay), o.weight_decay, "L2 weight decay")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  add_choice(app, cli_names(flag::kSchedule), c.schedule.kind, train::kScheduleNames,
             "Learning-rate schedule");
  app.add_option(cli_names(flag::kWarmupEpochs), c.schedule.warmup_epochs,
                 "Linear warm-up (epochs)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--step-epochs", c.schedule.step_epochs, "step schedule: epochs per decay")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--gamma", c.schedule.gamma, "step schedule: decay factor")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--final-lr-fraction", c.schedule.final_lr_fraction,
                 "cosine/onecycle: final rate as a fraction of --lr")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_option(cli_names(flag::kLabelSmoothing), c.label_smoothing, "Label smoothing")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_option(cli_names(flag::kSeed), c.seed,
                 "Random seed (model init, shuffling, augmentation)")
      ->capture_default_str();

  app.add_option(
         "-t,--threads", c.threads,
         "Intra-op threads (0: the cores this process may use: its CPU affinity and cgroup limit)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--workers", c.loader_workers,
                 "Data loader threads (0: build batches in the training thread)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--max-steps", c.max_steps, "Stop after this many steps in all (0: no limit)")
      ->check(CLI::NonNegativeNumber);
  app.add_option(cli_names(flag::kCheckpointEvery), c.checkpoint_every_steps,
                 "Also checkpoint every N steps (checkpoints are always written after each epoch)")
      ->check(CLI::NonNegativeNumber);
  app.add_option(cli_names(flag::kKeepCheckpoints), c.keep_checkpoints, "Checkpoints kept")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option(cli_names(flag::kMaxUnsavedSeconds), c.max_unsaved_seconds,
                 "How long an object store (-md s3://...) may not answer before the job fails: "
                 "training goes on meanwhile and checkpoints are saved once it is back")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_flag("--resume", c.resume, "Continue from the newest checkpoint in --model-dir");

  app.add_option(cli_names(flag::kMetricsPort), c.metrics_port,
                 "Prometheus endpoint port (0: pick a free one, -1: off)")
      ->check(CLI::Range(-1, 65535))
      ->capture_default_str();
  app.add_option("--metrics-bind", c.metrics_bind, "Address the metrics endpoint binds")
      ->capture_default_str();
  app.add_option(
         cli_names(flag::kMetricsLinger), c.metrics_linger,
         "When training fails by divergence, keep the metrics endpoint up this many "
         "seconds before exiting, for Prometheus to scrape the last values (0: exit at once)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option(cli_names(flag::kTerminationLog), c.termination_log,
                 "Write the final figures (JSON), or the error that ended the run, to this file as "
                 "the process exits (Kubernetes: /dev/termination-log)");
  app.add_option(cli_names(flag::kStallSeconds), c.stall_seconds,
                 "A trainer that makes no progress (no step) for this many seconds logs a stall "
                 "report: what it waits on and every thread's stack (0: max(300 s, 10 x the "
                 "longest gap between its steps so far), -1: off; before its first step "
                 "--stall-startup-seconds at least)")
      ->check(CLI::Range(-1.0, 1e9))
      ->capture_default_str();
  app.add_option(cli_names(flag::kStallStartupSeconds), c.stall_startup_seconds,
                 "The stall limit's floor until a trainer's first step (loading the data, forming "
                 "the group and restoring a checkpoint are no steps)")
      ->check(CLI::Range(1.0, 1e9))
      ->capture_default_str();
  app.add_option(cli_names(flag::kProgress), c.progress, "Progress display")
      ->check(CLI::IsMember({"auto", "bar", "lines", "none"}))
      ->capture_default_str();
  app.add_option("--log-every", c.log_every_steps,
                 "Steps between progress lines (0: about ten an epoch)")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("-v,--verbose", verbose, "Debug logging");
}

}  // namespace

// An incarnation from the operator (env CIFAR_INCARNATION, CIFAR_CHIEF_INCARNATION; none: 0, no
// fence); throws std::invalid_argument for anything but a whole number >= 0.
int64_t incarnation_from_env(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return 0;
  const auto number = contract::whole_number(value);
  if (!number) {
    throw std::invalid_argument(std::string(name) + "=" + value + ": not a whole number >= 0");
  }
  return *number;
}

// The parameter servers' incarnations (env CIFAR_PS_INCARNATIONS, "3,2"; none: empty); throws
// std::invalid_argument for anything but whole numbers >= 0 separated by commas.
std::vector<int64_t> incarnations_from_env(const char* name) {
  const char* value = std::getenv(name);
  std::vector<int64_t> numbers;
  if (value == nullptr || *value == '\0') return numbers;
  const std::string_view text(value);
  size_t start = 0;
  while (true) {
    const auto comma = text.find(',', start);
    const auto part =
        text.substr(start, comma == std::string_view::npos ? text.npos : comma - start);
    const auto number = contract::whole_number(part);
    if (!number) {
      throw std::invalid_argument(std::string(name) + "=" + value +
                                  ": not whole numbers >= 0 separated by commas");
    }
    numbers.push_back(*number);
    if (comma == std::string_view::npos) return numbers;
    start = comma + 1;
  }
}

ParsedCommandLine parse_command_line(int argc, const char* const argv[]) {
  CLI::App app{"cifar-train: trains CIFAR-10/100 (and Fashion-MNIST) image classifiers",
               "cifar-train"};
  ParsedCommandLine parsed;
  train::TrainConfig config;
  std::string context = "cpu";
  add_options(app, config, context, parsed.verbose);
  DistributedFlags distributed;
  add_distributed_options(app, config, distributed);

  auto args = seed_compatible_args(argc, argv);
  try {
    app.parse(args);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    parsed.exit_code = 0;
    return parsed;
  } catch (const CLI::ParseError& e) {
    std::cerr << "cifar-train: error: " << e.what() << "\nRun 'cifar-train --help' for usage.\n";
    parsed.exit_code = contract::kExitUsage;
    return parsed;
  }
  try {
    resolve_distributed(app, distributed, config);
    config.incarnation = incarnation_from_env(contract::env::kIncarnation);
    if (const char* uid = std::getenv(contract::env::kJobUid)) config.job_uid = uid;
    config.chief_incarnation = incarnation_from_env(contract::env::kChiefIncarnation);
    config.ps_incarnations = incarnations_from_env(contract::env::kPsIncarnations);
  } catch (const std::invalid_argument& e) {
    std::cerr << "cifar-train: error: " << e.what() << "\n";
    parsed.exit_code = contract::kExitUsage;
    return parsed;
  }
  config.device = context == "cudnn" ? "cuda" : context;
  parsed.config = std::move(config);
  return parsed;
}

}  // namespace cifar::cli
