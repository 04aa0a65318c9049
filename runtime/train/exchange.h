// How one step's gradients become the next parameters, behind a small interface so that the
// training loop (train/loop.h) is written once for every strategy: an optimizer step in this
// process (train/local_exchange.h), gradients averaged over the ranks of an all-reduce job first
// (distributed/allreduce/exchange.h), or gradients pushed to parameter servers that apply them
// and send the parameters back (distributed/ps/exchange.h). train/ knows no transport.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "train/train_state.h"

namespace cifar::models {
class Classifier;
}
namespace cifar::metrics {
class RuntimeMetrics;
}

namespace cifar::train {

class CheckpointManager;

// Which share of each epoch this trainer reads, and whether it is the chief: the one that
// writes checkpoints and the monitor log.
struct TrainerPlace {
  int rank = 0;
  int count = 1;
  bool chief = true;
  bool in_lockstep = false;  // steps with the chief, step for step: the chief's progress shows it
};

// The job's length in the exchange's updates (a PS's versions, or optimizer steps).
struct UpdatePlan {
  int64_t batches_per_epoch = 0;  // this trainer's share of an epoch
  int64_t updates_per_epoch = 0;  // the job's updates in one epoch
  int64_t schedule_updates = 0;   // the learning-rate schedule's span: every epoch
  int64_t total_updates = 0;      // where the job stops (--max-steps may end it early)
};

// The model the exchange takes over: built, on its device and (where the exchange asked for it)
// initialised from data. Shared: what an exchange hands on after the loop ended (an all-reduce
// rank's state, for the next group) is read from a model that outlives the loop.
struct TrainableModel {
  std::shared_ptr<models::Classifier> model;
  std::vector<torch::Tensor> parameters;  // those with requires_grad, in registration order
  std::vector<torch::Tensor> buffers;     // BatchNorm's running statistics
};

// What one update did.
struct UpdateResult {
  int64_t step = 0;   // the job's updates so far (a PS's version counts every trainer's)
  bool done = false;  // the job has made its last update (PS: maybe another trainer's)
  double communication_seconds = 0;  // of the update, the time spent exchanging with others
  // The samples the step trained over every trainer that steps with this one (nullopt: not known,
  // a PS trainer steps alone).
  std::optional<SampleTally> samples;
  // The step was not taken: the trainers it was planned with changed under it (an elastic
  // synchronous PS job's), so this trainer computes it again in its place now (place()), from
  // `step`, which may have moved on.
  bool redo = false;
};

class GradientExchange {
 public:
  virtual ~GradientExchange() = default;

  // May change after start() and after an update (an elastic synchronous PS job's slot).
  [[nodiscard]] virtual TrainerPlace place() const = 0;
  // The job's updates in an epoch of which this trainer reads `batches`: one per batch where the
  // trainers step together; one per batch of every trainer where they step on their own.
  [[nodiscard]] virtual int64_t updates_per_epoch(int64_t batches) const { return batches; }
  // Whether this trainer initialises the model from data (where not, it receives the chief's).
  [[nodiscard]] virtual bool initializes_model() const { return true; }
  // Whether the loop evaluates on the test set as each epoch ends (not where an evaluator does).
  [[nodiscard]] virtual bool evaluates() const { return true; }

  // Takes over `model` (once): restores or receives its parameters and returns where training
  // continues; `describe()` is valid after it. `metrics` outlives the exchange.
  virtual TrainState start(const TrainableModel& model, const UpdatePlan& plan,
                           metrics::RuntimeMetrics& metrics) = 0;
  // One line for the log: the strategy and this trainer's place in it.
  [[nodiscard]] virtual std::string describe() const = 0;

  // Around each step's backward (gradients of the previous step are cleared before it).
  virtual void begin_backward() {}
  // After backward: turns this trainer's gradients into the next parameters at rate `lr`;
  // `trained`: the samples this trainer's step trained (UpdateResult::samples sums them). Throws
  // std::runtime_error when the job cannot go on (a rank or a PS gone for good).
  virtual UpdateResult update(double lr, const SampleTally& trained) = 0;

  // Where training stands after start() and after each update: what an exchange that hands its
  // state to other trainers (an all-reduce rank regrouping) holds besides the model.
  virtual void committed(const TrainState& /*state*/) {}

  // After each update that did not end the job: whether the job stops at this step, given
  // whether this process was asked to (train/graceful_stop.h). Trainers that step together must
  // all stop at the same step, so an all-reduce job agrees on it in a collective.
  virtual bool agree_to_stop(bool asked) { return asked; }

  // After each update: whether the chief must checkpoint now, although none is due (a peer that
  // holds the job's state is about to go).
  [[nodiscard]] virtual bool wants_checkpoint() const { return false; }

  // The chief writes the job's checkpoint at `state` (the loop skips repeats of a step), in the
  // background: the loop waits for the writes with checkpoints()->wait_until_saved().
  virtual void save_checkpoint(const TrainState& state) = 0;
  // What the chief's checkpoints are written through (nullptr: this trainer writes none).
  [[nodiscard]] virtual const CheckpointManager* checkpoints() const = 0;
  // The job is done at `state`, its last checkpoint written (not called after a stop).
  virtual void finish(const TrainState& state) = 0;
};

}  // namespace cifar::train
