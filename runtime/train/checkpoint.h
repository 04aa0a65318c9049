// Checkpoints: model, optimizer, progress counters and RNG state in one object of the run's store
// (storage/store.h: a directory or an s3:// prefix), the newest `keep` kept. A checkpoint is
// taken at once and written in the background (background_writer.h: training goes on while the
// store is slow or away); an object is written whole (a directory: temp file, fsync, rename; S3:
// one PUT or a completed multipart upload), and a reader checks what it reads (a torn or foreign
// checkpoint is reported and passed over). A resumed run continues bit-exactly.
#pragma once

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize/archive.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "train/fence.h"
#include "train/train_state.h"

namespace cifar::storage {
class Store;
}

namespace cifar::train {

struct PendingWrite;

// A checkpoint that could not be written (a full or read-only volume, an I/O error, an object
// store that refused it): the message names the step, where and the reason. Nothing half-written is
// left behind, and the checkpoints written before are kept.
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

  // Commits behind `fence` (train/fence.h): a replaced chief writes and deletes nothing, and its
  // checkpoints carry its incarnation. A reader needs none.
  CheckpointManager(std::shared_ptr<storage::Store> store, std::string prefix, int keep,
                    Fence fence = {});
  // The store at `location` (storage::open_store: a directory or s3://BUCKET/PREFIX).
  CheckpointManager(const std::string& location, std::string prefix, int keep);

  // Takes a checkpoint of `state` and hands it to the background writer, which writes it and
  // deletes all but the newest `keep`; returns where it goes (informational: callers may ignore
  // it). Throws the failure of an earlier write: CheckpointWriteError (a volume), S3Error (an
  // object store that refused, or stayed away past --max-unsaved-seconds), Replaced.
  // What its commits are made behind (the run's other writes of this writer go behind it too).
  [[nodiscard]] const Fence& fence() const { return fence_; }
  // NOLINTNEXTLINE(modernize-use-nodiscard)
  std::string save(const torch::nn::Module& model, const torch::optim::Optimizer& optimizer,
                   const TrainState& state) const;
  // NOLINTNEXTLINE(modernize-use-nodiscard)
  std::string save(const torch::nn::Module& model, const TrainState& state,
                   const ExtraWriter& write_extra) const;
  // Until every checkpoint taken is written; throws, as save() does, if one could not be.
  void wait_until_saved() const;
  // The same for at most `at_most`: whether every checkpoint taken is written.
  [[nodiscard]] bool wait_until_saved(std::chrono::milliseconds at_most) const;
  // Throws the failure of a background write, if one failed (checked between steps).
  void raise_if_failed() const;
  // The step of the newest checkpoint this manager wrote (nullopt: none yet).
  [[nodiscard]] std::optional<int64_t> saved_step() const;

  // Restores the newest readable checkpoint into `model` and `optimizer` (and the global RNG);
  // an unreadable one (torn by a crash) is reported and the next older one tried. Empty when
  // there are none; throws when there are some but none can be restored.
  std::optional<TrainState> load_latest(torch::nn::Module& model,
                                        torch::optim::Optimizer& optimizer) const;
  std::optional<TrainState> load_latest(torch::nn::Module& model,
                                        const ExtraReader& read_extra) const;
  // The names of the checkpoints present, oldest first.
  [[nodiscard]] std::vector<std::string> list() const;
  // A checkpoint's bytes, or nothing if it is gone (rotated away since it was listed).
  [[nodiscard]] std::optional<std::string> read(const std::string& name) const;
  // The progress a checkpoint holds; throws if it cannot be read.
  [[nodiscard]] TrainState state_of(const std::string& name) const;
  // Calls `restore` with the newest checkpoint's name and bytes, then with older ones while it
  // throws (a checkpoint torn by a crash, or of another model: reported, and the first such
  // error kept in `newest_error`); returns the name it took, nullopt if none. The store's own
  // failure (S3Error) is thrown: an older checkpoint would not be better.
  using Restorer = std::function<void(const std::string& name, const std::string& bytes)>;
  std::optional<std::string> restore_newest(const Restorer& restore,
                                            std::string* newest_error = nullptr) const;
  // The name of the newest checkpoint whose progress can be read (a torn one is reported and
  // skipped), with its bytes.
  [[nodiscard]] std::optional<std::pair<std::string, std::string>> newest_readable() const;
  [[nodiscard]] std::string location_of(const std::string& name) const;
  [[nodiscard]] const storage::Store& store() const { return *store_; }

  // A checkpoint's bytes, as save() writes them (the incarnation of `fence`), without a store:
  // how a rank of an all-reduce job hands what it holds in memory to the others.
  [[nodiscard]] std::string to_bytes(const torch::nn::Module& model,
                                     const torch::optim::Optimizer& optimizer,
                                     const TrainState& state) const;
  // Restores a checkpoint given as its bytes, as load_latest does: how the ranks of an all-reduce
  // job all continue from the one that rank 0 read. Throws if it does not fit the model and
  // optimizer.
  static TrainState load_bytes(const std::string& bytes, torch::nn::Module& model,
                               torch::optim::Optimizer& optimizer);
  // Just the model weights, or just the progress, of a checkpoint's bytes (evaluation).
  static void model_from_bytes(const std::string& bytes, torch::nn::Module& model);
  static TrainState state_from_bytes(const std::string& bytes);
  // The same of a checkpoint file (tests, tools).
  static void load_model_file(const std::filesystem::path& file, torch::nn::Module& model);

 private:
  // The run's checkpoints as saves left them: listed at the first save, then kept up to date by
  // each save and prune (only the chief, behind its fence, writes them), so that a save into a
  // bucket is a PUT and perhaps a DELETE rather than a listing each time. Shared by copies.
  struct Known;
  struct Writer;
  // Writes one checkpoint and rotates: on the writer's thread, which holds what it uses.
  static void commit(const std::shared_ptr<storage::Store>& store, const Fence& fence, Known& known,
                     const std::string& prefix, int keep, const PendingWrite& checkpoint);
  std::shared_ptr<storage::Store> store_;
  Fence fence_;
  std::string prefix_;
  int keep_;
  std::shared_ptr<Known> known_;
  std::shared_ptr<Writer> writer_;
};

}  // namespace cifar::train
