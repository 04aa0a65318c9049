// Test support: a checkpoint's parameters, and "the same training up to float summation order",
// shared by the distributed-equivalence tests (PS sync and all-reduce vs one process).
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "models/model.h"
#include "train/checkpoint.h"

namespace cifar::testing {

inline std::map<std::string, torch::Tensor> parameters_in(const std::filesystem::path& checkpoint,
                                                          const std::string& model = "alexnet") {
  auto net = models::make_model(model, {});
  train::CheckpointManager::load_model_file(checkpoint, *net);
  std::map<std::string, torch::Tensor> out;
  for (const auto& p : net->named_parameters()) out[p.key()] = p.value().clone();
  return out;
}

// All parameters together within 1e-5 relative, and each tensor too, except those that stay near
// zero: alexnet's conv1.bias (norm ~1e-3) has a gradient that is a sum of ~30k terms that almost
// cancel, so float summation order alone moves it by ~1e-7 absolute (1e-4 relative); those are
// held to 1e-6 absolute.
inline void expect_same_training(const std::map<std::string, torch::Tensor>& got,
                                 const std::map<std::string, torch::Tensor>& want) {
  ASSERT_EQ(got.size(), want.size());
  std::vector<torch::Tensor> all_got;
  std::vector<torch::Tensor> all_want;
  for (const auto& [name, w] : want) {
    const auto& g = got.at(name);
    const auto difference = (g - w).norm().item<double>();
    const auto scale = w.norm().item<double>();
    if (scale > 1e-2) {
      EXPECT_LT(difference / scale, 1e-5) << name;
    } else {
      EXPECT_LT(difference, 1e-6) << name << " (norm " << scale << ")";
    }
    all_got.push_back(g.flatten());
    all_want.push_back(w.flatten());
  }
  const auto g = torch::cat(all_got);
  const auto w = torch::cat(all_want);
  EXPECT_LT((g - w).norm().item<double>() / w.norm().item<double>(), 1e-5) << "all parameters";
}

// Training moved alexnet's local3.weight away from its seed-1 initialisation: the runs compared
// above are not two untouched models.
inline void expect_moved_from_initialisation(const std::map<std::string, torch::Tensor>& params) {
  torch::manual_seed(1);
  auto initial = models::make_model("alexnet", {});
  EXPECT_GT((params.at("local3.weight") - initial->named_parameters()["local3.weight"])
                .norm()
                .item<double>(),
            1e-3);
}

}  // namespace cifar::testing
