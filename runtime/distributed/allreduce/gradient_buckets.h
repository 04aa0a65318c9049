// Gradient all-reduce in buckets, overlapped with backward (the scheme of PyTorch DDP's reducer
// and nnabla's all_reduce_callback). Parameters are grouped, in reverse registration order (the
// order backward produces their gradients), into flat buckets of at most `cap` bytes, the first
// one smaller so that communication starts early. Each parameter's .grad() is a view into its
// bucket (DDP's gradient_as_bucket_view), so backward accumulates straight into the buckets and
// the all-reduced means are the gradients: no copy in, no copy out. A hook after each
// parameter's gradient accumulation counts the bucket's ready gradients; a full bucket's
// all-reduce is started at once, in bucket order, so every rank issues the same collectives in
// the same order. Without overlap the buckets are all-reduced after backward.
#pragma once

#include <c10/util/intrusive_ptr.h>
#include <torch/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "distributed/allreduce/peer_wait.h"

namespace c10d {
class ProcessGroup;
class Work;
}  // namespace c10d

namespace torch::autograd {
struct Node;
}

namespace cifar::metrics {
class RuntimeMetrics;
}

namespace cifar::allreduce {

struct BucketOptions {
  int64_t cap_bytes = int64_t{25} << 20;
  int64_t first_cap_bytes = int64_t{1} << 20;
  bool overlap = true;
  PeerWait wait;  // for each bucket's all-reduce
};

// Which parameters (indices into the registration order) go into which bucket: reverse order,
// consecutive, the first bucket up to first_cap_bytes, the others up to cap_bytes (a parameter
// larger than the cap gets a bucket of its own). Pure; the same on every rank.
std::vector<std::vector<size_t>> assign_buckets(const std::vector<int64_t>& parameter_bytes,
                                                int64_t first_cap_bytes, int64_t cap_bytes);

class GradientBuckets {
 public:
  // Points every parameter's .grad() into the buckets (keeping its values); `metrics` may be
  // null.
  GradientBuckets(const std::vector<torch::Tensor>& parameters,
                  c10::intrusive_ptr<c10d::ProcessGroup> group, BucketOptions options,
                  metrics::RuntimeMetrics* metrics);
  ~GradientBuckets();
  GradientBuckets(const GradientBuckets&) = delete;
  GradientBuckets& operator=(const GradientBuckets&) = delete;

  // Re-points a .grad() that was replaced (set to none, assigned) into its bucket.
  void begin_backward();
  // Starts what backward left (no overlap: everything) and waits: every .grad() holds the mean.
  // A parameter that got no gradient this step all-reduces the .grad() it had (zero after
  // zero_grad), the same on every rank.
  void end_backward();

  [[nodiscard]] size_t bucket_count() const { return buckets_.size(); }

  // Sums over the steps so far, for the end-of-run summary.
  struct Totals {
    int64_t steps = 0;
    int64_t bytes = 0;             // all-reduced
    double in_flight_seconds = 0;  // first bucket started to last one done
    double wait_seconds = 0;       // of that, after backward had finished
  };
  [[nodiscard]] const Totals& totals() const { return totals_; }

 private:
  struct Bucket {
    std::vector<size_t> parameters;
    torch::Tensor flat;
    size_t missing = 0;  // gradients not yet accumulated in this step
    c10::intrusive_ptr<c10d::Work> work;
    std::string description;  // as a stall report names its all-reduce
  };
  void point_grad_into_bucket(size_t parameter);
  void on_gradient_ready(size_t parameter);
  void start(size_t bucket);
  void start_ready_buckets();  // in bucket order, as far as they are full

  std::vector<torch::Tensor> parameters_;
  std::vector<torch::Tensor> grad_views_;  // parameter -> its slice of its bucket
  // Each parameter's AccumulateGrad node (kept alive: a parameter holds it weakly) and the key
  // of the post hook on it, removed on destruction.
  std::vector<std::pair<std::shared_ptr<torch::autograd::Node>, uintptr_t>> hooks_;
  c10::intrusive_ptr<c10d::ProcessGroup> group_;
  BucketOptions options_;
  metrics::RuntimeMetrics* metrics_;
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_;  // parameter -> bucket
  std::vector<bool> ready_;        // parameter's gradient accumulated this step
  size_t next_to_start_ = 0;
  std::chrono::steady_clock::time_point first_started_;
  int64_t bytes_ = 0;
  Totals totals_;
};

}  // namespace cifar::allreduce
