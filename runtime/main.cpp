// cifar-train: parse the command line, run, turn failures into clear messages and exit codes
// (0 done, 1 failed, 2 bad usage or configuration).
#include <spdlog/spdlog.h>

#include <exception>
#include <stdexcept>

#include "cli/options.h"
#include "data/dataset.h"
#include "train/host_memory.h"
#include "train/trainer.h"

int main(int argc, char** argv) {
  const auto parsed = cifar::cli::parse_command_line(argc, argv);
  if (!parsed.config) return parsed.exit_code;
  spdlog::set_pattern("[%H:%M:%S.%e] [%^%l%$] %v");
  if (parsed.verbose) spdlog::set_level(spdlog::level::debug);

  try {
    cifar::train::keep_freed_memory_for_reuse();
    const auto r = cifar::train::run_training(*parsed.config);
    const auto& t = r.time;
    const double total = t.total() > 0 ? t.total() : 1;
    spdlog::info(
        "done: {} epochs, {} steps, test accuracy {:.2f}% (best {:.2f}%), {:.1f} img/s "
        "({:.1f} img/s after warm-up)",
        r.epochs_completed, r.steps, 100 * r.last_epoch.test_accuracy, 100 * r.best_test_accuracy,
        r.images_per_second, r.steady_images_per_second);
    spdlog::info(
        "step time: data wait {:.1f}%, forward {:.1f}%, backward {:.1f}%, optimizer {:.1f}%, "
        "other {:.1f}%",
        100 * t.data_wait / total, 100 * t.forward / total, 100 * t.backward / total,
        100 * t.optimizer / total, 100 * t.other / total);
    return 0;
  } catch (const cifar::data::DataError& e) {
    spdlog::error("data: {}", e.what());
    return 1;
  } catch (const std::invalid_argument& e) {
    spdlog::error("{}", e.what());
    return 2;
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return 1;
  }
}
