// The all-reduce exchange: every rank trains like a single process (train/local_exchange.h) on
// its share of each epoch, with the gradients averaged over the ranks by c10d during backward
// (gradient_buckets.h) before each optimizer step. Rank 0's initial parameters are broadcast,
// BatchNorm's buffers follow rank 0's after every step, and rank 0 is the chief.
#pragma once

#include <c10/util/intrusive_ptr.h>

#include <memory>
#include <string>
#include <vector>

#include "distributed/allreduce/gradient_buckets.h"
#include "train/local_exchange.h"

namespace c10d {
class ProcessGroup;
}

namespace cifar::allreduce {

class AllReduceExchange final : public train::LocalExchange {
 public:
  // `fence`: rank 0's, as the run's chief (none for the others).
  AllReduceExchange(const train::TrainConfig& config, c10::intrusive_ptr<c10d::ProcessGroup> group,
                    BucketOptions options, train::Fence fence);
  ~AllReduceExchange() override;

  [[nodiscard]] train::TrainerPlace place() const override;
  // Every rank continues from the same checkpoint (the model dir on a shared volume), or fails.
  train::TrainState start(const train::TrainableModel& model, const train::UpdatePlan& plan,
                          metrics::RuntimeMetrics& metrics) override;
  [[nodiscard]] std::string describe() const override;
  void begin_backward() override;
  // Waits for the gradients' all-reduce and the buffers' broadcast, then steps; every
  // --verify-replicas steps checks that the ranks agree bit for bit. Throws std::runtime_error
  // if a rank is gone or the replicas diverged.
  train::UpdateResult update(double lr) override;
  // One tiny all-reduce (max) of the ranks' stop requests, so that all stop after the same step
  // and rank 0's checkpoint is every rank's state.
  bool agree_to_stop(bool asked) override;
  // Logs what the all-reduce cost; rank 0 writes the done marker.
  void finish(const train::TrainState& state) override;

 private:
  [[nodiscard]] int rank() const;

  c10::intrusive_ptr<c10d::ProcessGroup> group_;
  BucketOptions options_;
  int64_t verify_every_;
  std::unique_ptr<GradientBuckets> buckets_;
  std::vector<torch::Tensor> buffers_;
  std::vector<torch::Tensor> replica_;  // what must be equal on every rank: parameters, buffers
  int64_t verified_ = 0;
  double stop_agreement_seconds_ = 0;  // in agree_to_stop, over the run
};

}  // namespace cifar::allreduce
