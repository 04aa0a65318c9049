// Checkpoints: model, optimizer, progress counters and RNG state in one file, written atomically
// (temp file, fsync, rename), the newest `keep` kept. A resumed run continues bit-exactly.
#pragma once

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize/archive.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "train/train_state.h"

namespace cifar::train {

// A checkpoint that could not be written (a full or read-only volume, an I/O error): the message
// names the step, the file and the system's reason. Nothing half-written is left behind, and the
// checkpoints written before are kept.
class CheckpointWriteError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class CheckpointManager {
 public:
  // What besides the model, the state and the RNG a checkpoint holds (the optimizer's state, or
  // a parameter-server job's): written and read by the caller.
  using ExtraWriter = std::function<void(torch::serialize::OutputArchive&)>;
  using ExtraReader = std::function<void(torch::serialize::InputArchive&)>;

  CheckpointManager(std::filesystem::path dir, std::string prefix, int keep);

  // Writes a checkpoint for `state` and deletes all but the newest `keep`; returns its path
  // (informational: callers may ignore it). Throws CheckpointWriteError.
  // NOLINTNEXTLINE(modernize-use-nodiscard)
  std::filesystem::path save(const torch::nn::Module& model,
                             const torch::optim::Optimizer& optimizer,
                             const TrainState& state) const;
  // NOLINTNEXTLINE(modernize-use-nodiscard)
  std::filesystem::path save(const torch::nn::Module& model, const TrainState& state,
                             const ExtraWriter& write_extra) const;
  // Restores the newest readable checkpoint into `model` and `optimizer` (and the global RNG);
  // an unreadable one (torn by a crash) is reported and the next older one tried. Empty when
  // there are none; throws when there are some but none can be restored.
  std::optional<TrainState> load_latest(torch::nn::Module& model,
                                        torch::optim::Optimizer& optimizer) const;
  std::optional<TrainState> load_latest(torch::nn::Module& model,
                                        const ExtraReader& read_extra) const;
  // Checkpoints present, oldest first.
  [[nodiscard]] std::vector<std::filesystem::path> list() const;
  // The newest checkpoint whose progress can be read (a torn one is reported and skipped).
  [[nodiscard]] std::optional<std::filesystem::path> newest_readable() const;
  // Restores a checkpoint given as the bytes of its file, as load_latest does a file: how the
  // ranks of an all-reduce job all continue from the one that rank 0 read. Throws if it does not
  // fit the model and optimizer.
  static TrainState load_bytes(const std::string& bytes, torch::nn::Module& model,
                               torch::optim::Optimizer& optimizer);

  // Reads just the model weights (evaluation, tests).
  static void load_model(const std::filesystem::path& file, torch::nn::Module& model);
  static TrainState read_state(const std::filesystem::path& file);

 private:
  std::filesystem::path dir_;
  std::string prefix_;
  int keep_;
};

}  // namespace cifar::train
