// Optimiser construction and learning-rate control, independent of which optimiser it is.
#pragma once

#include <torch/optim/optimizer.h>

#include <memory>
#include <vector>

#include "config/optimizer_options.h"

namespace cifar::train {

// SGD (momentum, Nesterov, weight decay) or Adam over `parameters`. Throws
// std::invalid_argument for an unknown name or an invalid combination.
std::unique_ptr<torch::optim::Optimizer> make_optimizer(const OptimizerOptions& options,
                                                        double initial_lr,
                                                        std::vector<torch::Tensor> parameters);

void set_learning_rate(torch::optim::Optimizer& optimizer, double lr);

}  // namespace cifar::train
