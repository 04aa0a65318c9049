#include "train/optimizer.h"

#include <torch/optim/adam.h>
#include <torch/optim/sgd.h>

#include <stdexcept>

namespace cifar::train {

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const OptimizerOptions& o,
                                                        double initial_lr,
                                                        std::vector<torch::Tensor> parameters) {
  if (o.kind == OptimizerKind::kSgd) {
    if (o.nesterov && o.momentum <= 0) {
      throw std::invalid_argument("Nesterov momentum needs --momentum > 0");
    }
    return std::make_unique<torch::optim::SGD>(std::move(parameters),
                                               torch::optim::SGDOptions(initial_lr)
                                                   .momentum(o.momentum)
                                                   .nesterov(o.nesterov)
                                                   .weight_decay(o.weight_decay));
  }
  return std::make_unique<torch::optim::Adam>(std::move(parameters),
                                              torch::optim::AdamOptions(initial_lr)
                                                  .betas({o.adam_beta1, o.adam_beta2})
                                                  .weight_decay(o.weight_decay));
}

void set_learning_rate(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) group.options().set_lr(lr);
}

}  // namespace cifar::train
