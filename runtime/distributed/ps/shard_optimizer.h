// The update rules a PS shard applies to its flat parameter pieces: SGD (momentum, Nesterov,
// weight decay) and Adam, with the same arithmetic as torch::optim (tests compare them step by
// step). torch::optim cannot be used here: it reads the gradient from `param.grad()`, one field
// that concurrent pushes would have to share, which hogwild mode does by design.
#pragma once

#include <torch/types.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "config/optimizer_options.h"

namespace cifar::ps {

class ShardOptimizer {
 public:
  ShardOptimizer(train::OptimizerOptions options, std::vector<torch::Tensor> params);

  // How an update writes the parameters.
  enum class Write {
    kInPlace,     // into the piece's memory: concurrent readers may see a mix (hogwild)
    kOutOfPlace,  // into new memory that replaces the piece: tensors handed out stay unchanged
  };

  // Applies `grad` (float32, same size) to piece `piece` at learning rate `lr`. Calls for
  // different pieces may run concurrently; in-place calls for the same piece race, as hogwild
  // intends.
  void apply(size_t piece, const torch::Tensor& grad, double lr, Write write);

  // The current parameters, one tensor per piece. With out-of-place writes a tensor taken from
  // here is an immutable snapshot of its piece: later updates replace it instead of changing it.
  [[nodiscard]] const std::vector<torch::Tensor>& params() const { return params_; }

  // Optimizer state by slot name ("momentum"; "exp_avg", "exp_avg_sq"), one tensor per piece.
  [[nodiscard]] const std::vector<std::string>& slot_names() const { return slot_names_; }
  // Every slot name any optimizer here uses.
  static std::vector<std::string> all_slot_names() { return {"momentum", "exp_avg", "exp_avg_sq"}; }
  [[nodiscard]] torch::Tensor& slot(size_t slot_index, size_t piece);
  // Steps taken per piece (Adam's bias correction); all pieces of a shard take the same steps.
  [[nodiscard]] int64_t steps(size_t piece) const;
  void set_steps(int64_t steps);

 private:
  train::OptimizerOptions options_;
  std::vector<torch::Tensor> params_;
  std::vector<std::string> slot_names_;
  std::vector<std::vector<torch::Tensor>> slots_;  // [slot][piece]
  std::deque<std::atomic<int64_t>> steps_;         // per piece
};

}  // namespace cifar::ps
