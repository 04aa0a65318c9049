// The run's store (a directory or an s3:// prefix) fenced against the job's own stale pods, as
// HDFS or ZooKeeper fence an old leader with an epoch. The operator gives every pod it creates an
// incarnation that only grows (env CIFAR_INCARNATION: a replacement outranks the pod it replaces).
// Each writer of the run, the chief and the evaluator, claims its slot's fence record
// (<run>.<slot>.fence in the store) with its number as it starts, and checks it before every
// commit: a checkpoint's write and the rotation's deletes, the done marker, a monitor record, the
// evaluator's records and best model. A pod left running on a cut-off node, whose replacement has
// claimed the slot since, so stops with Replaced ("this pod was replaced by incarnation N;
// stopping") instead of writing beside it.
//
// A claim is a compare-and-swap (Store::put_if: an flock'd read-compare-rename in a directory,
// S3's conditional PUT), so two pods starting at once cannot both hold the slot. Limits: a commit
// whose check passed just before the newer pod's claim still lands (the window between the check
// and the write: one write at most; the evaluator then ignores such a checkpoint, see
// is_stale_checkpoint); the guarantee needs read-after-write consistency (local disks, NFS, and S3
// since 2020; most S3-compatible stores).
//
// An elastic all-reduce job's chief moves: each round's rank 0 claims the chief's slot with the
// round's generation instead, so that a rank 0 of an older round (frozen, cut off from its peers)
// stops at its next commit once the group went on without it.
//
// A process holds the fence of the slot it writes (main claims it) and hands it to its writers;
// without an incarnation (0: run by hand, or by an operator that gives none) there is none and
// every check passes.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include "config/train_config.h"

namespace cifar::storage {
class Store;
}

namespace cifar::train {

// This process's pod was replaced: it must write nothing more into the run. Says "this pod was
// replaced by incarnation N; stopping (<how it knows>)".
class Replaced : public std::runtime_error {
 public:
  // `newer_incarnation`: nullopt where this pod is not told its number.
  Replaced(std::optional<int64_t> newer_incarnation, const std::string& how_known)
      : std::runtime_error("this pod was replaced by " +
                           (newer_incarnation ? "incarnation " + std::to_string(*newer_incarnation)
                                              : std::string("a newer incarnation")) +
                           "; stopping (" + how_known + ")") {}
  using std::runtime_error::runtime_error;
};

// Another job continues this run now (checkpoint.resumeFrom): every writer of this job stops.
class RunTakenOver : public Replaced {
 public:
  using Replaced::Replaced;
};

enum class FenceSlot { kChief, kEvaluator };

// What a slot's fence record says: who holds it (the job, and its pod's incarnation), and (the
// chief) the step it resumed at.
struct FenceRecord {
  int64_t incarnation = 0;
  std::optional<int64_t> resumed_step;
  std::string job_uid;  // "": a record of a process run by hand, or of an older cifar-train
};
std::optional<FenceRecord> read_fence(const TrainConfig& config, FenceSlot slot);
// The same, in the run's store `store` (a reader that holds it: the evaluator).
std::optional<FenceRecord> read_fence(const storage::Store& store, const TrainConfig& config,
                                      FenceSlot slot);

// A writer's hold on its slot of the run, handed to what it writes with (the checkpoint manager,
// the monitor and evaluation logs, the done marker), which check it before every commit. A copy
// is the same hold. Default: no fence (run by hand, or an operator that gives no incarnation),
// every check passes.
class Fence {
 public:
  Fence() = default;
  // Claims `slot` of the run for config.incarnation (none without one). Throws Replaced if a newer
  // incarnation holds it already.
  [[nodiscard]] static Fence claim(const TrainConfig& config, FenceSlot slot);
  // The same for `number` in place of the pod's incarnation, under an operator (config.incarnation
  // set; none otherwise): an elastic job's chief, its group's rank 0, claims with its round's
  // generation (allreduce/rendezvous_keys.h), above every pod incarnation and every older round's.
  [[nodiscard]] static Fence claim(const TrainConfig& config, FenceSlot slot, int64_t number);

  // Throws Replaced once a newer incarnation has claimed the slot.
  void check() const;
  // The chief's: the step it resumed at (its first checkpoint's step or 0), written to the record.
  void record_resumed_step(int64_t step) const;
  // The holder's incarnation, which its checkpoints carry (0: no fence).
  [[nodiscard]] int64_t incarnation() const { return incarnation_; }

 private:
  Fence(std::shared_ptr<storage::Store> store, std::string name, int64_t incarnation,
        std::string job_uid);

  std::shared_ptr<storage::Store> store_;  // null: no fence
  std::string name_;                       // <run>.<slot>.fence
  int64_t incarnation_ = 0;
  std::string job_uid_;
};

// A checkpoint (its writer's incarnation and step) that a replaced chief wrote after its
// replacement had taken over, through the check-then-rename window: written by an older
// incarnation than the chief slot's holder, at a step past the one the holder resumed at.
bool is_stale_checkpoint(const std::optional<FenceRecord>& chief, int64_t written_by, int64_t step);

}  // namespace cifar::train
