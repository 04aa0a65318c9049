// The shard's update rules against torch::optim, step by step.
#include "distributed/ps/shard_optimizer.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "contract/enum_names.h"
#include "train/optimizer.h"

namespace cifar::ps {
namespace {

// Runs six updates of both with the same gradients and varying learning rates, writing the
// shard's parameters in place and out of place.
void expect_same_as_torch(const train::OptimizerOptions& options) {
  using Write = ShardOptimizer::Write;
  for (const auto write : {Write::kInPlace, Write::kOutOfPlace}) {
    torch::manual_seed(3);
    const auto initial = torch::randn({257});
    auto theirs = initial.clone().requires_grad_(true);
    auto torch_optimizer = train::make_optimizer(options, 0.1, {theirs});
    ShardOptimizer shard_optimizer(options, {initial.clone()});
    for (int step = 0; step < 6; ++step) {
      const double lr = 0.1 / (step + 1);
      const auto grad = torch::randn({257});
      train::set_learning_rate(*torch_optimizer, lr);
      theirs.mutable_grad() = grad.clone();
      torch_optimizer->step();
      const auto before = shard_optimizer.params()[0];
      const auto before_values = before.clone();
      shard_optimizer.apply(0, grad, lr, write);
      const auto& after = shard_optimizer.params()[0];
      ASSERT_TRUE(torch::equal(after, theirs.detach()))
          << contract::name_of(train::kOptimizerNames, options.kind) << " step " << step;
      if (write == Write::kOutOfPlace) {
        // What a reply still holds is a snapshot: the update did not write into it.
        EXPECT_TRUE(torch::equal(before, before_values))
            << contract::name_of(train::kOptimizerNames, options.kind) << " step " << step;
        EXPECT_NE(before.data_ptr(), after.data_ptr());
      } else {
        EXPECT_EQ(before.data_ptr(), after.data_ptr());
      }
    }
    EXPECT_EQ(shard_optimizer.steps(0), 6);
  }
}

TEST(ShardOptimizer, SgdNesterovWithWeightDecayMatchesTorch) {
  train::OptimizerOptions o;
  o.kind = train::OptimizerKind::kSgd;
  o.momentum = 0.9;
  o.nesterov = true;
  o.weight_decay = 5e-4;
  expect_same_as_torch(o);
}

TEST(ShardOptimizer, SgdPlainMomentumAndNoMomentumMatchTorch) {
  train::OptimizerOptions o;
  o.kind = train::OptimizerKind::kSgd;
  o.momentum = 0.5;
  o.nesterov = false;
  o.weight_decay = 0;
  expect_same_as_torch(o);
  o.momentum = 0;
  expect_same_as_torch(o);
}

TEST(ShardOptimizer, AdamMatchesTorch) {
  train::OptimizerOptions o;
  o.kind = train::OptimizerKind::kAdam;
  o.weight_decay = 1e-4;
  expect_same_as_torch(o);
}

TEST(ShardOptimizer, SlotsAreNamedPerOptimizer) {
  train::OptimizerOptions o;
  o.kind = train::OptimizerKind::kSgd;
  EXPECT_EQ(ShardOptimizer(o, {torch::zeros({2})}).slot_names(),
            std::vector<std::string>{"momentum"});
  o.kind = train::OptimizerKind::kAdam;
  EXPECT_EQ(ShardOptimizer(o, {torch::zeros({2})}).slot_names(),
            (std::vector<std::string>{"exp_avg", "exp_avg_sq"}));
}

}  // namespace
}  // namespace cifar::ps
