// cifar-train: parse the command line, run, turn failures into clear messages and exit codes
// (0 done, 1 failed, 2 bad usage or configuration).
#include <spdlog/spdlog.h>

#include <csignal>
#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <string>

#include "cli/launch.h"
#include "cli/options.h"
#include "contract/exit_codes.h"
#include "data/dataset.h"
#include "distributed/allreduce/trainer.h"
#include "distributed/ps/server.h"
#include "distributed/ps/trainer.h"
#include "train/evaluator.h"
#include "train/host_memory.h"
#include "train/trainer.h"

namespace {

// Trains on one machine, or plays this process's role of a distributed job.
int run(const cifar::train::TrainConfig& config) {
  using cifar::cluster::Role;
  const auto& dist = config.distributed;
  if (dist.enabled && dist.job.role == Role::kPs) {
    cifar::ps::run_parameter_server(config);
    return 0;
  }
  if (dist.enabled && dist.job.role == Role::kEvaluator) {
    cifar::train::run_evaluator(config);
    return 0;
  }
  const bool allreduce = dist.enabled && dist.strategy == "allreduce";
  const auto r = allreduce      ? cifar::allreduce::run_allreduce_trainer(config)
                 : dist.enabled ? cifar::ps::run_ps_trainer(config)
                                : cifar::train::run_training(config);
  const auto& t = r.time;
  const double total = t.total() > 0 ? t.total() : 1;
  spdlog::info("done: {} epochs, {} steps, {:.1f} img/s ({:.1f} img/s after warm-up)",
               r.epochs_completed, r.steps, r.images_per_second, r.steady_images_per_second);
  if (dist.enabled && !allreduce) {
    spdlog::info("step time: data wait {:.1f}%, forward+backward {:.1f}%, push+pull {:.1f}%",
                 100 * t.data_wait / total, 100 * t.forward / total, 100 * t.optimizer / total);
    return 0;
  }
  spdlog::info("test accuracy {:.2f}% (best {:.2f}%)", 100 * r.last_epoch.test_accuracy,
               100 * r.best_test_accuracy);
  spdlog::info(
      "step time: data wait {:.1f}%, forward {:.1f}%, backward{} {:.1f}%, optimizer {:.1f}%, "
      "other {:.1f}%",
      100 * t.data_wait / total, 100 * t.forward / total, allreduce ? " + all-reduce" : "",
      100 * t.backward / total, 100 * t.optimizer / total, 100 * t.other / total);
  return 0;
}

// In a container cifar-train is PID 1, and the kernel drops the signals PID 1 has no handler
// for: without one, deleting a pod waited out the whole grace period for SIGKILL. Checkpoints
// are written atomically (temp file, rename), so stopping at once loses nothing written.
void exit_on_termination(int signal) { std::_Exit(cifar::contract::kExitSignalBase + signal); }

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "launch") {
    return cifar::cli::launch_local_ranks(argc, argv);  // forwards SIGTERM to its ranks
  }
  std::signal(SIGTERM, exit_on_termination);
  const auto parsed = cifar::cli::parse_command_line(argc, argv);
  if (!parsed.config) return parsed.exit_code;
  const auto& dist = parsed.config->distributed;
  // In a job's interleaved logs every line says which process wrote it.
  const auto task = dist.strategy == "allreduce" && dist.job.is_trainer()
                        ? "rank " + std::to_string(dist.allreduce.rank)
                        : dist.job.task_name();
  spdlog::set_pattern(dist.enabled ? "[%H:%M:%S.%e] [" + task + "] [%^%l%$] %v"
                                   : "[%H:%M:%S.%e] [%^%l%$] %v");
  if (parsed.verbose) spdlog::set_level(spdlog::level::debug);

  try {
    cifar::train::keep_freed_memory_for_reuse();
    return run(*parsed.config);
  } catch (const cifar::data::DataError& e) {
    spdlog::error("data: {}", e.what());
    return cifar::contract::kExitFailed;
  } catch (const std::invalid_argument& e) {
    spdlog::error("{}", e.what());
    return cifar::contract::kExitUsage;
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return cifar::contract::kExitFailed;
  }
}
