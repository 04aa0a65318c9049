// cifar-train: parse the command line, run, turn failures into clear messages and exit codes
// (contract/exit_codes.h: 0 done, 1 failed, 2 bad usage or configuration, 3 stopped with its state
// saved, 4 replaced by a newer pod, 5 the checkpoint store refused or stayed away too long, 6 the
// dataset's objects are missing, wrong or refused; 128 + the signal that killed it).
#include <spdlog/spdlog.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <string>

#include "cli/certs.h"
#include "cli/launch.h"
#include "cli/options.h"
#include "cli/rendezvous_store.h"
#include "contract/exit_codes.h"
#include "contract/flags.h"
#include "data/dataset.h"
#include "distributed/allreduce/trainer.h"
#include "distributed/ps/job_tls.h"
#include "distributed/ps/parameter_server.h"
#include "distributed/ps/trainer.h"
#include "storage/s3_client.h"
#include "storage/store.h"
#include "train/device.h"
#include "train/error_text.h"
#include "train/evaluator.h"
#include "train/fence.h"
#include "train/graceful_stop.h"
#include "train/host_memory.h"
#include "train/local_exchange.h"
#include "train/loop.h"
#include "train/result.h"
#include "train/run_store.h"
#include "train/stall_watch.h"
#include "train/termination_log.h"

namespace {

// Trains on one machine, or plays this process's role of a distributed job.
int run(const cifar::train::TrainConfig& config) {
  using cifar::cluster::Role;
  const auto& dist = config.distributed;
  // The device first: a pod that was told -c cuda and sees no GPU says so at once (exit 2, which a
  // job does not retry), not after its rendezvous, its data and its model.
  static_cast<void>(cifar::train::resolve_device(config.device));
  // A PS job's credentials are read and checked before anything else (a PS would otherwise claim
  // the run and restore its checkpoints, a trainer build its model and data, and only then stop).
  if (dist.enabled && dist.strategy == cifar::train::Strategy::kParameterServer &&
      dist.job.role != Role::kEvaluator) {
    const auto end =
        dist.job.role == Role::kPs ? cifar::ps::ChannelEnd::kServes : cifar::ps::ChannelEnd::kCalls;
    if (!cifar::ps::job_credentials(dist.ps, end)) {
      spdlog::warn(
          "the parameter-server channel is PLAINTEXT ({}): no TLS, and anyone who reaches the "
          "parameter servers' ports can read the model and send it gradients",
          cifar::contract::flag::kInsecure.name);
    }
  }
  // The run's store answers (its bucket is there, the keys are right) before any work starts: a job
  // that cannot keep its checkpoints fails at once, not at its first checkpoint.
  if (dist.uses_store()) {
    static_cast<void>(cifar::train::open_run_store(config)->list(cifar::train::run_name(config)));
  }
  // The run's writers take their slot of its fence first (train/fence.h): a pod replaced while it
  // was cut off, restarted in place, stops here, before it rendezvouses or reads the run.
  cifar::train::Fence fence;
  if (dist.enabled && dist.job.role == Role::kEvaluator) {
    fence = cifar::train::Fence::claim(config, cifar::train::FenceSlot::kEvaluator);
  } else if (dist.chief() && !dist.elastic()) {  // an elastic job's: each round's rank 0 claims it
    fence = cifar::train::Fence::claim(config, cifar::train::FenceSlot::kChief);
  }
  // Reports a trainer that stops making progress (alive, not training): where it waits.
  auto stall_watchdog = cifar::train::watch_for_stalls(config);
  if (dist.enabled && dist.job.role == Role::kPs) {
    return cifar::ps::run_parameter_server(config);
  }
  if (dist.enabled && dist.job.role == Role::kEvaluator) {
    cifar::train::write_termination_log(config.termination_log,
                                        cifar::train::run_evaluator(config, fence));
    return 0;
  }
  const auto result = [&] {
    if (!dist.enabled) {
      cifar::train::LocalExchange local(config, fence);
      return cifar::train::run_training(config, local, fence);
    }
    return dist.strategy == cifar::train::Strategy::kAllReduce
               ? cifar::allreduce::run_allreduce_trainer(config, fence)
               : cifar::ps::run_ps_trainer(config, fence);
  }();
  stall_watchdog.reset();  // the run is over: no stall report may follow its last words
  for (const auto& line : cifar::train::describe(result)) spdlog::info("{}", line);
  cifar::train::write_termination_log(config.termination_log, result);
  if (!result.stopped) return cifar::contract::kExitOk;
  if (const auto since = cifar::train::time_since_stop_request()) {
    spdlog::info("exiting {:.1f} s after the stop request (exit code {}: stopped, state saved)",
                 since->count(), cifar::contract::kExitStopped);
  } else {  // an all-reduce rank that stopped with another that was asked to
    spdlog::info("exiting with the other ranks (exit code {}: stopped, state saved)",
                 cifar::contract::kExitStopped);
  }
  return cifar::contract::kExitStopped;
}

// Ends the process once all of ours is closed (the run's scope left, the termination message
// written), without the libraries' exit-time finalizers: gRPC's threads may still be opening a
// connection for a channel already dropped while OpenSSL's and torch's finalizers free what they
// use (a trainer that gave up on its PS died there with SIGSEGV now and then).
[[noreturn]] void end_process(int code) {
  spdlog::shutdown();
  std::fflush(nullptr);
  std::_Exit(code);
}

// Runs the parsed command line; failures become clear messages and exit codes.
int run_or_explain(const cifar::cli::ParsedCommandLine& parsed) {
  const auto& dist = parsed.config->distributed;
  // In a job's interleaved logs every line says which process wrote it.
  spdlog::set_pattern(dist.enabled ? "[%H:%M:%S.%e] [" + dist.who() + "] [%^%l%$] %v"
                                   : "[%H:%M:%S.%e] [%^%l%$] %v");
  if (parsed.verbose) spdlog::set_level(spdlog::level::debug);

  const auto fail = [&](const std::string& message, int code) {
    spdlog::error("{}", message);
    cifar::train::write_termination_error(parsed.config->termination_log, message);
    return code;
  };
  try {
    cifar::train::keep_freed_memory_for_reuse();
    return run(*parsed.config);
  } catch (const cifar::train::Replaced& e) {
    return fail(e.what(), cifar::contract::kExitReplaced);
  } catch (const cifar::storage::S3Error& e) {
    return fail("checkpoint store " + parsed.config->model_dir + " unavailable: " + e.what(),
                cifar::contract::kExitStoreUnavailable);
  } catch (const cifar::data::DatasetUnavailable& e) {
    return fail(std::string("data: ") + e.what(), cifar::contract::kExitDataUnavailable);
  } catch (const cifar::data::DataError& e) {
    return fail(std::string("data: ") + e.what(), cifar::contract::kExitFailed);
  } catch (const std::invalid_argument& e) {
    return fail(e.what(), cifar::contract::kExitUsage);
  } catch (const std::exception& e) {
    return fail(cifar::train::error_text(e), cifar::contract::kExitFailed);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "certs") return cifar::cli::make_certificates(argc, argv);
  if (argc > 1 && std::string(argv[1]) == "rendezvous-store") {
    return cifar::cli::serve_rendezvous_store(argc, argv);
  }
  if (argc > 1 && std::string(argv[1]) == "launch") {
    return cifar::cli::launch_local_ranks(argc, argv);  // forwards SIGTERM to its ranks
  }
  cifar::train::install_stop_handlers();
  const auto parsed = cifar::cli::parse_command_line(argc, argv);
  if (!parsed.config) return parsed.exit_code;
  end_process(run_or_explain(parsed));
}
