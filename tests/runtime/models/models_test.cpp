// The model zoo: parameter counts pinned to the reference implementations, shapes, gradients,
// fastnet's whitening, and the registry's errors.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "models/model.h"

namespace cifar::models {
namespace {

struct Reference {
  std::string name;
  int64_t in_channels;
  int64_t image_size;
  int64_t trainable;
  int64_t total;  // including frozen parameters (fastnet); BN running stats are buffers
};

// 3x32x32 CIFAR counts come from the references (see bench/torch_models.py, whose twins print the
// same numbers): simplecnn 1,250,858 = Keras' cifar10_cnn model.summary(); alexnet 1,068,298 at
// the TF tutorial's 24x24 crops; resnet20/56 = akamaster/pytorch_resnet_cifar10 (0.27M/0.85M);
// resnet23 = nnabla-examples (nnabla also stores the 1,920 BN means/variances as parameters:
// 99,402); fastnet = airbench94's make_net (288 whitening weights and 1,152 BN scales frozen).
// 1x28x28 (Fashion-MNIST) rows pin our own size arithmetic.
const std::vector<Reference> kReferences = {
    {"simplecnn", 3, 32, 1'250'858, 1'250'858}, {"simplecnn", 1, 28, 889'834, 889'834},
    {"alexnet", 3, 24, 1'068'298, 1'068'298},   {"alexnet", 3, 32, 1'756'426, 1'756'426},
    {"alexnet", 1, 28, 1'384'586, 1'384'586},   {"resnet23", 3, 32, 97'482, 97'482},
    {"resnet23", 1, 28, 96'330, 96'330},        {"resnet20", 3, 32, 269'722, 269'722},
    {"resnet20", 1, 28, 269'434, 269'434},      {"resnet56", 3, 32, 853'018, 853'018},
    {"resnet56", 1, 28, 852'730, 852'730},      {"fastnet", 3, 32, 1'971'352, 1'972'792},
    {"fastnet", 1, 28, 1'962'120, 1'963'304},
};

std::string describe(const Reference& r) {
  return r.name + " " + std::to_string(r.in_channels) + "x" + std::to_string(r.image_size);
}

ModelOptions options_for(const Reference& r, int64_t num_classes = 10) {
  return ModelOptions{num_classes, r.in_channels, r.image_size};
}

TEST(Models, NamesListsAllSix) {
  EXPECT_EQ(model_names(), (std::vector<std::string>{"simplecnn", "alexnet", "resnet23", "resnet20",
                                                     "resnet56", "fastnet"}));
}

TEST(Models, ParameterCountsMatchReferences) {
  for (const auto& r : kReferences) {
    const auto model = make_model(r.name, options_for(r));
    EXPECT_EQ(parameter_count(*model), r.trainable) << describe(r);
    EXPECT_EQ(parameter_count(*model, /*trainable_only=*/false), r.total) << describe(r);
  }
}

TEST(Models, ForwardGivesOneRowOfLogitsPerImage) {
  torch::manual_seed(0);
  for (const auto& r : kReferences) {
    const auto model = make_model(r.name, options_for(r, /*num_classes=*/7));
    const auto images = torch::randn({2, r.in_channels, r.image_size, r.image_size});
    model->init_from_data(images);
    for (const bool training : {true, false}) {
      model->train(training);
      const auto logits = model->forward(images);
      EXPECT_EQ(logits.sizes(), torch::IntArrayRef({2, 7})) << describe(r);
      EXPECT_TRUE(torch::isfinite(logits).all().item<bool>()) << describe(r);
    }
  }
}

TEST(Models, BackwardReachesEveryTrainableParameter) {
  torch::manual_seed(0);
  for (const auto& name : model_names()) {
    const auto model = make_model(name, ModelOptions{});
    const auto images = torch::randn({2, 3, 32, 32});
    model->init_from_data(images);
    const auto loss =
        torch::nn::functional::cross_entropy(model->forward(images), torch::tensor({1, 4}));
    loss.backward();
    for (const auto& p : model->named_parameters()) {
      if (p->requires_grad()) {
        ASSERT_TRUE(p->grad().defined()) << name << " " << p.key();
        EXPECT_TRUE(torch::isfinite(p->grad()).all().item<bool>()) << name << " " << p.key();
        EXPECT_GT(p->grad().abs().sum().item<double>(), 0.0) << name << " " << p.key();
      } else {
        EXPECT_FALSE(p->grad().defined()) << name << " " << p.key();
      }
    }
  }
}

TEST(Models, AlexNetPoolsLikeTensorFlowSame) {
  // At 24x24 (the tutorial's crops) the flattened features feeding local3 are 6x6x64.
  const auto model = make_model("alexnet", ModelOptions{10, 3, 24});
  const auto params = model->named_parameters();
  EXPECT_EQ(params["local3.weight"].sizes(), torch::IntArrayRef({384, int64_t{6} * 6 * 64}));
}

// Images whose pixels and channels are correlated, so whitening has something to undo.
torch::Tensor correlated_images(int64_t n, int64_t channels, int64_t side) {
  const auto noise = torch::randn({n, channels, side + 1, side + 1});
  auto images = noise.slice(2, 0, side).slice(3, 0, side) +
                0.8 * noise.slice(2, 1, side + 1).slice(3, 1, side + 1);
  const auto mix = torch::eye(channels) + 0.5;  // every channel leaks into the others
  images = torch::einsum("dc,nchw->ndhw", {mix, images});
  return images * 0.7 + 0.3;  // uncentred on purpose: airbench whitens raw second moments
}

TEST(Models, FastNetWhiteningDecorrelatesPatches) {
  torch::manual_seed(0);
  for (const int64_t channels : {3, 1}) {
    const auto model = make_model("fastnet", ModelOptions{10, channels, 32});
    const auto images = correlated_images(64, channels, 32);
    model->init_from_data(images);

    const auto params = model->named_parameters();
    const auto weight = params["whiten.weight"];
    const int64_t half = channels * 4;
    ASSERT_EQ(weight.size(0), 2 * half);
    EXPECT_FALSE(weight.requires_grad());
    EXPECT_TRUE(params["whiten.bias"].requires_grad());
    EXPECT_TRUE(torch::equal(weight.slice(0, half), -weight.slice(0, 0, half)));

    // Every 2x2 patch through the first half of the filters: second moments ~ identity
    // (eigenvalue / (eigenvalue + 5e-4) on the diagonal).
    const auto out = torch::conv2d(images, weight.slice(0, 0, half));
    const auto rows = out.permute({0, 2, 3, 1}).reshape({-1, half});
    const auto moments = rows.t().mm(rows) / rows.size(0);
    EXPECT_TRUE(torch::allclose(moments, torch::eye(half), /*rtol=*/0, /*atol=*/1e-2))
        << "channels " << channels << "\n"
        << moments;
  }
}

TEST(Models, FastNetRejectsImagesOfTheWrongShape) {
  const auto model = make_model("fastnet", ModelOptions{});
  EXPECT_THROW(model->init_from_data(torch::randn({4, 1, 32, 32})), std::invalid_argument);
  EXPECT_THROW(make_model("fastnet", ModelOptions{10, 3, 16}), std::invalid_argument);
}

TEST(Models, UnknownNameIsRejectedWithTheKnownNames) {
  try {
    make_model("resnet1202", ModelOptions{});
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("resnet1202"), std::string::npos) << message;
    for (const auto& name : model_names()) {
      EXPECT_NE(message.find(name), std::string::npos) << message;
    }
  }
  EXPECT_THROW(make_model("", ModelOptions{}), std::invalid_argument);
}

TEST(Models, BadOptionsAreRejected) {
  EXPECT_THROW(make_model("simplecnn", ModelOptions{0, 3, 32}), std::invalid_argument);
  EXPECT_THROW(make_model("resnet20", ModelOptions{10, 0, 32}), std::invalid_argument);
  EXPECT_THROW(make_model("simplecnn", ModelOptions{10, 3, 8}), std::invalid_argument);
}

}  // namespace
}  // namespace cifar::models
