#include "train/progress.h"

#include <fmt/core.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>

namespace cifar::train {

Progress::Mode Progress::parse_mode(const std::string& option) {
  if (option == "auto") return ::isatty(STDOUT_FILENO) != 0 ? Mode::kBar : Mode::kLines;
  if (option == "bar") return Mode::kBar;
  if (option == "lines") return Mode::kLines;
  if (option == "none") return Mode::kNone;
  throw std::invalid_argument("progress must be auto, bar, lines or none, not '" + option + "'");
}

Progress::Progress(Mode mode, int64_t steps_per_epoch, int64_t total_epochs,
                   int64_t log_every_steps)
    : mode_(mode),
      steps_per_epoch_(std::max<int64_t>(steps_per_epoch, 1)),
      total_epochs_(total_epochs),
      // About ten lines an epoch unless told otherwise.
      log_every_(log_every_steps > 0 ? log_every_steps
                                     : std::max<int64_t>(1, steps_per_epoch_ / 10)) {}

void Progress::begin_epoch(int64_t epoch) { epoch_ = epoch; }

bool Progress::wants(int64_t batch) const {
  switch (mode_) {
    case Mode::kBar:
      return true;
    case Mode::kLines:
      return batch % log_every_ == 0 || batch == steps_per_epoch_;
    case Mode::kNone:
      return false;
  }
  return false;
}

void Progress::update(const Snapshot& s) {
  if (!wants(s.batch)) return;
  if (mode_ == Mode::kBar) {
    constexpr int kWidth = 30;
    const auto filled = static_cast<int>(kWidth * s.batch / steps_per_epoch_);
    fmt::print("\r\033[Kepoch {}/{} [{:=<{}}{:<{}}] {}/{}  loss {:.4f}  acc {:5.2f}%  {:.0f} img/s",
               epoch_, total_epochs_, "", filled, filled < kWidth ? ">" : "", kWidth - filled,
               s.batch, steps_per_epoch_, s.loss, 100 * s.accuracy, s.images_per_second);
  } else {
    fmt::print("epoch {}/{} step {} ({}/{})  loss {:.4f}  acc {:.2f}%  lr {:.4g}  {:.0f} img/s\n",
               epoch_, total_epochs_, s.step, s.batch, steps_per_epoch_, s.loss, 100 * s.accuracy,
               s.learning_rate, s.images_per_second);
  }
  std::fflush(stdout);
}

void Progress::end_epoch(const EpochRecord& r) {
  if (mode_ == Mode::kNone) return;
  if (mode_ == Mode::kBar) fmt::print("\r\033[K");
  // A parameter-server master leaves the test set to the evaluator (NaN here).
  const std::string test =
      std::isnan(r.test_accuracy)
          ? std::string("test: see the evaluator")
          : fmt::format("test loss {:.4f} acc {:.2f}%", r.test_loss, 100 * r.test_accuracy);
  fmt::print("epoch {}/{} done: train loss {:.4f} acc {:.2f}%  {}  {:.0f} img/s  {:.1f} s\n",
             r.epoch, total_epochs_, r.train_loss, 100 * r.train_accuracy, test,
             r.images_per_second, r.seconds);
  std::fflush(stdout);
}

}  // namespace cifar::train
