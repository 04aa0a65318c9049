// Gradient all-reduce in buckets, overlapped with backward (the scheme of PyTorch DDP's reducer
// and nnabla's all_reduce_callback). Parameters are grouped, in reverse registration order (the
// order backward produces their gradients), into flat buckets of at most `cap` bytes, the first
// one smaller so that communication starts early. An autograd hook copies each gradient into its
// bucket; a full bucket's all-reduce is started at once, in bucket order, so every rank issues
// the same collectives in the same order. Without overlap the buckets are all-reduced after
// backward. Either way the result is the mean over the ranks, written back into each .grad().
#pragma once

#include <c10/util/intrusive_ptr.h>
#include <torch/types.h>

#include <chrono>
#include <cstdint>
#include <vector>

namespace c10d {
class ProcessGroup;
class Work;
}  // namespace c10d

namespace cifar::metrics {
class RuntimeMetrics;
}

namespace cifar::allreduce {

struct BucketOptions {
  int64_t cap_bytes = int64_t{25} << 20;
  int64_t first_cap_bytes = int64_t{1} << 20;
  bool overlap = true;
  std::chrono::milliseconds timeout{60000};
};

// Which parameters (indices into the registration order) go into which bucket: reverse order,
// consecutive, the first bucket up to first_cap_bytes, the others up to cap_bytes (a parameter
// larger than the cap gets a bucket of its own). Pure; the same on every rank.
std::vector<std::vector<size_t>> assign_buckets(const std::vector<int64_t>& parameter_bytes,
                                                int64_t first_cap_bytes, int64_t cap_bytes);

class GradientBuckets {
 public:
  // `metrics` may be null.
  GradientBuckets(const std::vector<torch::Tensor>& parameters,
                  c10::intrusive_ptr<c10d::ProcessGroup> group, BucketOptions options,
                  metrics::RuntimeMetrics* metrics);
  ~GradientBuckets();
  GradientBuckets(const GradientBuckets&) = delete;
  GradientBuckets& operator=(const GradientBuckets&) = delete;

  void begin_backward();
  // Starts what backward left (no overlap: everything), waits, writes the means into .grad().
  void end_backward();

  [[nodiscard]] size_t bucket_count() const { return buckets_.size(); }

 private:
  struct Bucket {
    std::vector<size_t> parameters;
    std::vector<int64_t> offsets;  // of each parameter in `flat`
    torch::Tensor flat;
    size_t missing = 0;  // gradients not yet copied in this step
    c10::intrusive_ptr<c10d::Work> work;
  };
  void on_gradient(size_t parameter, const torch::Tensor& grad);
  void start(size_t bucket);
  void start_ready_buckets();  // in bucket order, as far as they are full

  std::vector<torch::Tensor> parameters_;
  std::vector<unsigned> hooks_;  // autograd hook handles, removed on destruction
  c10::intrusive_ptr<c10d::ProcessGroup> group_;
  BucketOptions options_;
  metrics::RuntimeMetrics* metrics_;
  std::vector<Bucket> buckets_;
  std::vector<std::pair<size_t, size_t>> where_;  // parameter -> (bucket, index in bucket)
  std::vector<bool> filled_;                      // parameter's gradient is in its bucket
  size_t next_to_start_ = 0;
  std::chrono::steady_clock::time_point first_started_;
  int64_t bytes_ = 0;
};

}  // namespace cifar::allreduce
