// What data-parallel training adds to the single-process training loop, as a small interface so
// that train/ does not depend on c10d (distributed/allreduce implements it).
#pragma once

#include <torch/types.h>

#include <vector>

namespace cifar::metrics {
class RuntimeMetrics;
}

namespace cifar::train {

class DataParallel {
 public:
  virtual ~DataParallel() = default;

  [[nodiscard]] virtual int rank() const = 0;
  [[nodiscard]] virtual int world_size() const = 0;
  // Makes every rank's `tensors` (parameters and buffers) equal to rank 0's.
  virtual void broadcast_from_rank0(const std::vector<torch::Tensor>& tensors) = 0;
  // Takes over the gradients of `parameters` (in registration order) and keeps `buffers` equal
  // on every rank; called once. `metrics` (may be null) outlives this object.
  virtual void attach(const std::vector<torch::Tensor>& parameters,
                      const std::vector<torch::Tensor>& buffers,
                      metrics::RuntimeMetrics* metrics) = 0;
  // Around one step's backward; on return from end_backward every parameter's grad holds the
  // mean of all ranks' gradients and every buffer (BatchNorm's running statistics, which each
  // rank's forward updated from its own batch) holds rank 0's values, as with PyTorch DDP's
  // broadcast_buffers. Throws std::runtime_error if a rank is gone.
  virtual void begin_backward() = 0;
  virtual void end_backward() = 0;
  // After the optimizer step `step` (1-based) with the replica's parameters and buffers: lets
  // the implementation check that the ranks still agree. Throws std::runtime_error if not.
  virtual void end_step(const std::vector<torch::Tensor>& replica, int64_t step) = 0;
};

}  // namespace cifar::train
