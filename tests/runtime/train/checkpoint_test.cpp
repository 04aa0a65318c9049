#include "train/checkpoint.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <fstream>

#include "tests/support/process.h"

namespace cifar::train {
namespace {

struct Fixture {
  torch::nn::Linear model{torch::nn::LinearOptions(4, 3)};
  torch::optim::SGD optimizer{model->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9)};

  // One real step so the optimizer carries momentum buffers worth checkpointing.
  void step() {
    optimizer.zero_grad();
    model->forward(torch::randn({8, 4})).pow(2).sum().backward();
    optimizer.step();
  }
};

TEST(Checkpoint, RoundTripsModelOptimizerStateAndRng) {
  testing::TempDir dir;
  torch::manual_seed(3);
  Fixture a;
  a.step();
  TrainState state;
  state.epoch = 2;
  state.step = 17;
  state.batch_in_epoch = 5;
  state.epoch_loss_sum = 1.25;
  state.epoch_correct = 40;
  state.epoch_seen = 64;
  state.best_test_accuracy = 0.5;
  CheckpointManager manager(dir.path(), "run", 3);
  manager.save(*a.model, a.optimizer, state);
  manager.wait_until_saved();
  const auto next_random = torch::rand({4});  // drawn after the save: must repeat after a load

  torch::manual_seed(99);
  Fixture b;
  const auto restored = manager.load_latest(*b.model, b.optimizer);
  ASSERT_TRUE(restored.has_value());
  EXPECT_EQ(restored->epoch, 2);
  EXPECT_EQ(restored->step, 17);
  EXPECT_EQ(restored->batch_in_epoch, 5);
  EXPECT_DOUBLE_EQ(restored->epoch_loss_sum, 1.25);
  EXPECT_EQ(restored->epoch_correct, 40);
  EXPECT_EQ(restored->epoch_seen, 64);
  EXPECT_DOUBLE_EQ(restored->best_test_accuracy, 0.5);
  EXPECT_TRUE(torch::equal(a.model->weight, b.model->weight));
  EXPECT_TRUE(torch::equal(torch::rand({4}), next_random));

  // Identical continuation proves the momentum buffers came back too.
  torch::manual_seed(5);
  a.step();
  torch::manual_seed(5);
  b.step();
  EXPECT_TRUE(torch::equal(a.model->weight, b.model->weight));
}

TEST(Checkpoint, KeepsOnlyTheNewestAndLeavesNoTempFiles) {
  testing::TempDir dir;
  Fixture f;
  CheckpointManager manager(dir.path(), "run", 2);
  for (int64_t s = 1; s <= 5; ++s) {
    TrainState state;
    state.step = s;
    manager.save(*f.model, f.optimizer, state);
    manager.wait_until_saved();
  }
  const auto files = manager.list();
  ASSERT_EQ(files.size(), 2U);
  EXPECT_EQ(manager.state_of(files[0]).step, 4);
  EXPECT_EQ(manager.state_of(files[1]).step, 5);
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    EXPECT_EQ(entry.path().extension(), ".pt") << entry.path();
  }
}

TEST(Checkpoint, FallsBackToAnOlderCheckpointWhenTheNewestIsTorn) {
  testing::TempDir dir;
  Fixture f;
  CheckpointManager manager(dir.path(), "run", 3);
  TrainState state;
  state.step = 1;
  manager.save(*f.model, f.optimizer, state);
  manager.wait_until_saved();
  state.step = 2;
  const auto newest = manager.save(*f.model, f.optimizer, state);
  manager.wait_until_saved();
  std::filesystem::resize_file(newest, std::filesystem::file_size(newest) / 2);

  Fixture g;
  const auto restored = manager.load_latest(*g.model, g.optimizer);
  ASSERT_TRUE(restored.has_value());
  EXPECT_EQ(restored->step, 1);
}

TEST(Checkpoint, CheckpointsOfAnotherModelAreAnErrorNotAFreshStart) {
  testing::TempDir dir;
  Fixture f;
  CheckpointManager manager(dir.path(), "run", 3);
  manager.save(*f.model, f.optimizer, TrainState{});
  manager.wait_until_saved();
  torch::nn::Linear other(torch::nn::LinearOptions(5, 3));
  torch::optim::SGD other_optimizer(other->parameters(), torch::optim::SGDOptions(0.1));
  try {
    manager.load_latest(*other, other_optimizer);
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("can be restored"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("model/param/weight is [3, 4] Float in the checkpoint "
                                         "but [3, 5] Float in the model"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(manager.list().size(), 1U);
}

TEST(Checkpoint, NothingToLoadInAnEmptyDirectory) {
  testing::TempDir dir;
  Fixture f;
  EXPECT_FALSE(CheckpointManager(dir.path(), "run", 3).load_latest(*f.model, f.optimizer));
}

}  // namespace
}  // namespace cifar::train
