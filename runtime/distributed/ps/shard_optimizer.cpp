#include "distributed/ps/shard_optimizer.h"

#include <torch/torch.h>

#include <cmath>
#include <stdexcept>

namespace cifar::ps {

// torch::optim::AdamOptions' default.
constexpr double kAdamEpsilon = 1e-8;

ShardOptimizer::ShardOptimizer(train::OptimizerOptions options, std::vector<torch::Tensor> params)
    : options_(options), params_(std::move(params)), steps_(params_.size()) {
  if (options_.kind == train::OptimizerKind::kSgd) {
    if (options_.momentum > 0) slot_names_ = {"momentum"};
  } else {
    slot_names_ = {"exp_avg", "exp_avg_sq"};
  }
  // Zero state reproduces torch's first step exactly: SGD's buffer becomes 0 * m + d_p = d_p.
  for (size_t s = 0; s < slot_names_.size(); ++s) {
    auto& tensors = slots_.emplace_back();
    for (const auto& p : params_) tensors.push_back(torch::zeros_like(p));
  }
}

torch::Tensor& ShardOptimizer::slot(size_t slot_index, size_t piece) {
  return slots_.at(slot_index).at(piece);
}

int64_t ShardOptimizer::steps(size_t piece) const { return steps_.at(piece).load(); }

void ShardOptimizer::set_steps(int64_t steps) {
  for (auto& s : steps_) s.store(steps);
}

void ShardOptimizer::apply(size_t piece, const torch::Tensor& grad, double lr, Write write) {
  torch::NoGradGuard no_grad;
  auto& p = params_.at(piece);
  const double wd = options_.weight_decay;
  if (options_.kind == train::OptimizerKind::kSgd) {
    auto d_p = wd != 0 ? grad.add(p, wd) : grad;
    if (options_.momentum != 0) {
      auto& buf = slots_[0][piece];
      buf.mul_(options_.momentum).add_(d_p);
      d_p = options_.nesterov ? d_p.add(buf, options_.momentum) : buf;
    }
    steps_[piece].fetch_add(1);
    if (write == Write::kInPlace) {
      p.add_(d_p, -1 * lr);
    } else {
      p = p.add(d_p, -1 * lr);  // the same memory traffic as in place, and no snapshot copy
    }
    return;
  }
  // Adam
  const int64_t step = steps_[piece].fetch_add(1) + 1;
  const double beta1 = options_.adam_beta1;
  const double beta2 = options_.adam_beta2;
  const double bias_correction1 = 1 - std::pow(beta1, static_cast<double>(step));
  const double bias_correction2 = 1 - std::pow(beta2, static_cast<double>(step));
  const auto g = wd != 0 ? grad.add(p, wd) : grad;
  auto& exp_avg = slots_[0][piece];
  auto& exp_avg_sq = slots_[1][piece];
  exp_avg.mul_(beta1).add_(g, 1 - beta1);
  exp_avg_sq.mul_(beta2).addcmul_(g, g, 1 - beta2);
  const auto denom = (exp_avg_sq.sqrt() / std::sqrt(bias_correction2)).add_(kAdamEpsilon);
  if (write == Write::kInPlace) {
    p.addcdiv_(exp_avg, denom, -(lr / bias_correction1));
  } else {
    p = p.addcdiv(exp_avg, denom, -(lr / bias_correction1));
  }
}

}  // namespace cifar::ps
