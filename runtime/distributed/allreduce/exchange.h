// The all-reduce exchange: every rank trains like a single process (train/local_exchange.h) on
// its share of each epoch, with the gradients averaged over the ranks by c10d during backward
// (gradient_buckets.h) before each optimizer step. Rank 0's initial parameters are broadcast,
// BatchNorm's buffers follow rank 0's after every step, and rank 0 is the chief. When its group
// breaks, a rank keeps what it trained (held_state) for the next group, which continues from the
// newest state any of its ranks holds rather than from a checkpoint.
#pragma once

#include <c10/util/intrusive_ptr.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "distributed/allreduce/gradient_buckets.h"
#include "train/local_exchange.h"

namespace c10d {
class ProcessGroup;
}

namespace cifar::allreduce {

// What a rank trained, kept for the next group: a checkpoint's bytes and the counters they hold.
struct HeldState {
  int64_t step = 0;
  int64_t epochs_completed = 0;
  std::string bytes;
};

class AllReduceExchange final : public train::LocalExchange {
 public:
  // `group`: formed in rendezvous round `round`. `fence`: rank 0's, as the run's chief (none for
  // the others). `held`: what this rank's exchange of the group before held (held_state()), if
  // anything.
  AllReduceExchange(const train::TrainConfig& config, c10::intrusive_ptr<c10d::ProcessGroup> group,
                    int64_t round, BucketOptions options, train::Fence fence,
                    std::optional<HeldState> held = std::nullopt,
                    std::function<bool()> must_reform = {});
  ~AllReduceExchange() override;

  [[nodiscard]] train::TrainerPlace place() const override;
  // Every rank continues from the newest state a rank of the group holds in memory (handed over
  // by that rank), or else from rank 0's newest checkpoint, or from rank 0's initial parameters.
  train::TrainState start(const train::TrainableModel& model, const train::UpdatePlan& plan,
                          metrics::RuntimeMetrics& metrics) override;
  [[nodiscard]] std::string describe() const override;
  void begin_backward() override;
  // Waits for the gradients' all-reduce and the buffers' broadcast, sums the step's samples over
  // the group (a small all-reduce), then steps. No collective comes between the optimizer step
  // and committed(), so a rank lost in one leaves the others holding a whole step: the one
  // before, or this one. Throws std::runtime_error if a rank is gone.
  train::UpdateResult update(double lr, const train::SampleTally& trained) override;
  // One tiny all-reduce (max) of the ranks' stop requests, so that all stop after the same step
  // and rank 0's checkpoint is every rank's state. In an elastic job it also carries whether the
  // group must form again (`must_reform`, asked by rank 0): all then throw ReformGroup.
  bool agree_to_stop(bool asked) override;
  // Holds `state`; after a step, every --verify-replicas-every steps, checks that the ranks agree
  // bit for bit (throws std::runtime_error if a rank is gone or the replicas diverged).
  void committed(const train::TrainState& state) override;
  // The model and optimizer at the last step every rank completed, in a checkpoint's bytes: what
  // this rank hands to the next group. Nothing before start(), or where an update was under way
  // (this rank's parameters may then be a step ahead of its state).
  [[nodiscard]] std::optional<HeldState> held_state();
  // Logs what the all-reduce cost; rank 0 writes the done marker.
  void finish(const train::TrainState& state) override;

 private:
  [[nodiscard]] int rank() const;
  // `mine` summed over the group.
  train::SampleTally sum_over_group(const train::SampleTally& mine);
  // The group's newest state and where it came from (for the log); empty: nothing to continue.
  std::pair<std::string, std::string> newest_state();

  c10::intrusive_ptr<c10d::ProcessGroup> group_;
  int64_t round_;
  BucketOptions options_;
  int64_t verify_every_;
  std::unique_ptr<GradientBuckets> buckets_;
  std::vector<torch::Tensor> buffers_;
  std::vector<torch::Tensor> replica_;  // what must be equal on every rank: parameters, buffers
  int64_t verified_ = 0;
  double stop_agreement_seconds_ = 0;  // in agree_to_stop, over the run
  std::optional<HeldState> held_;      // from the group before, until start() hands it over
  std::function<bool()> must_reform_;
  std::optional<train::TrainState> committed_;
  std::vector<torch::Tensor> committed_buffers_;  // the buffers at committed_
  bool stepping_ = false;  // an update changed the model since the last committed()
};

}  // namespace cifar::allreduce
