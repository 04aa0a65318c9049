// The shard's update rules against torch::optim, step by step.
#include "dist/ps/shard_optimizer.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "train/optimizer.h"

namespace cifar::ps {
namespace {

// Runs `steps` updates of both with the same gradients and varying learning rates.
void expect_same_as_torch(const train::OptimizerOptions& options) {
  torch::manual_seed(3);
  const auto initial = torch::randn({257});
  auto theirs = initial.clone().requires_grad_(true);
  auto torch_optimizer = train::make_optimizer(options, 0.1, {theirs});
  auto ours = initial.clone();
  ShardOptimizer shard_optimizer(options, {ours});
  for (int step = 0; step < 6; ++step) {
    const double lr = 0.1 / (step + 1);
    const auto grad = torch::randn({257});
    train::set_learning_rate(*torch_optimizer, lr);
    theirs.mutable_grad() = grad.clone();
    torch_optimizer->step();
    shard_optimizer.apply(0, grad, lr);
    ASSERT_TRUE(torch::equal(ours, theirs.detach())) << options.name << " step " << step;
  }
  EXPECT_EQ(shard_optimizer.steps(0), 6);
}

TEST(ShardOptimizer, SgdNesterovWithWeightDecayMatchesTorch) {
  train::OptimizerOptions o;
  o.name = "sgd";
  o.momentum = 0.9;
  o.nesterov = true;
  o.weight_decay = 5e-4;
  expect_same_as_torch(o);
}

TEST(ShardOptimizer, SgdPlainMomentumAndNoMomentumMatchTorch) {
  train::OptimizerOptions o;
  o.name = "sgd";
  o.momentum = 0.5;
  o.nesterov = false;
  o.weight_decay = 0;
  expect_same_as_torch(o);
  o.momentum = 0;
  expect_same_as_torch(o);
}

TEST(ShardOptimizer, AdamMatchesTorch) {
  train::OptimizerOptions o;
  o.name = "adam";
  o.weight_decay = 1e-4;
  expect_same_as_torch(o);
}

TEST(ShardOptimizer, SlotsAreNamedPerOptimizer) {
  train::OptimizerOptions o;
  o.name = "sgd";
  EXPECT_EQ(ShardOptimizer(o, {torch::zeros({2})}).slot_names(),
            std::vector<std::string>{"momentum"});
  o.name = "adam";
  EXPECT_EQ(ShardOptimizer(o, {torch::zeros({2})}).slot_names(),
            (std::vector<std::string>{"exp_avg", "exp_avg_sq"}));
  o.name = "lion";
  EXPECT_THROW(ShardOptimizer(o, {torch::zeros({2})}), std::invalid_argument);
}

}  // namespace
}  // namespace cifar::ps
