#include "distributed/allreduce/trainer.h"

#include <spdlog/spdlog.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <memory>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <utility>

#include "distributed/allreduce/gradient_buckets.h"
#include "distributed/allreduce/process_group.h"
#include "distributed/allreduce/replicas.h"
#include "train/data_parallel.h"
#include "train/evaluator.h"
#include "train/setup.h"

namespace cifar::allreduce {
namespace {

class AllReduceDataParallel final : public train::DataParallel {
 public:
  AllReduceDataParallel(c10::intrusive_ptr<c10d::ProcessGroup> group, BucketOptions options,
                        int64_t verify_every)
      : group_(std::move(group)), options_(options), verify_every_(verify_every) {}

  [[nodiscard]] int rank() const override { return group_->getRank(); }
  [[nodiscard]] int world_size() const override { return group_->getSize(); }

  void broadcast_from_rank0(const std::vector<torch::Tensor>& tensors) override {
    broadcast_coalesced(*group_, tensors, options_.timeout);
  }

  void attach(const std::vector<torch::Tensor>& parameters,
              const std::vector<torch::Tensor>& buffers,
              metrics::RuntimeMetrics* metrics) override {
    buffers_ = buffers;
    buckets_ = std::make_unique<GradientBuckets>(parameters, group_, options_, metrics);
    spdlog::info("rank {}: {} gradient buckets ({} MB cap, first {} MB), overlap {}", rank(),
                 buckets_->bucket_count(), options_.cap_bytes >> 20,
                 static_cast<double>(options_.first_cap_bytes) / (1 << 20),
                 options_.overlap ? "on" : "off");
  }

  void begin_backward() override { buckets_->begin_backward(); }
  void end_backward() override {
    buckets_->end_backward();
    if (!buffers_.empty()) broadcast_coalesced(*group_, buffers_, options_.timeout);
  }

  void end_step(const std::vector<torch::Tensor>& replica, int64_t step) override {
    if (verify_every_ == 0 || step % verify_every_ != 0) return;
    verify_replicas(*group_, replica, step, options_.timeout);
    ++verified_;
  }

  void log_summary() const {
    const auto& t = buckets_->totals();
    if (t.steps == 0) return;
    const auto steps = static_cast<double>(t.steps);
    spdlog::info(
        "rank {}: all-reduce {:.2f} MB per step, in flight {:.1f} ms per step, of which {:.1f} "
        "ms waited after backward",
        rank(), static_cast<double>(t.bytes) / steps / 1e6, 1e3 * t.in_flight_seconds / steps,
        1e3 * t.wait_seconds / steps);
    if (verify_every_ > 0) {
      spdlog::info("rank {}: replicas bit-identical at all {} checks (every {} steps)", rank(),
                   verified_, verify_every_);
    }
  }

 private:
  c10::intrusive_ptr<c10d::ProcessGroup> group_;
  BucketOptions options_;
  std::unique_ptr<GradientBuckets> buckets_;
  std::vector<torch::Tensor> buffers_;
  int64_t verify_every_;
  int64_t verified_ = 0;
};

}  // namespace

train::TrainResult run_allreduce_trainer(const train::TrainConfig& config) {
  const auto& ar = config.distributed.allreduce;
  const auto backend = resolve_backend(ar.backend, config.device);
  BucketOptions options;
  options.cap_bytes = static_cast<int64_t>(ar.bucket_cap_mb * (1 << 20));
  options.first_cap_bytes = static_cast<int64_t>(ar.first_bucket_mb * (1 << 20));
  options.overlap = ar.overlap;
  options.timeout = std::chrono::milliseconds(static_cast<int64_t>(ar.timeout_seconds * 1000));
  AllReduceDataParallel parallel(make_process_group(ar, backend), options,
                                 ar.verify_replicas_every);
  auto rank_config = config;
  if (config.device == "cuda") {
    // Each local rank trains on its own GPU (more ranks than GPUs share them round-robin).
    const auto gpus = static_cast<int>(torch::cuda::device_count());
    rank_config.device = "cuda:" + std::to_string(gpus > 0 ? ar.local_rank % gpus : 0);
  }
  auto result = train::run_training(rank_config, &parallel);
  parallel.log_summary();
  if (parallel.rank() == 0) train::write_done_marker(config, result.steps);
  return result;
}

}  // namespace cifar::allreduce
