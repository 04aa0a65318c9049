// The model zoo: every network is built by name through one factory.
#pragma once

#include <torch/nn/module.h>
#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace cifar::models {

struct ModelOptions {
  int64_t num_classes = 10;
  int64_t in_channels = 3;
  int64_t image_size = 32;  // square input side
};

// A classifier: images N x C x H x W (normalised floats) -> logits N x num_classes.
class Classifier : public torch::nn::Module {
 public:
  virtual torch::Tensor forward(torch::Tensor images) = 0;
  // Data-dependent initialisation (fastnet's patch whitening); a no-op for most models.
  // `images` is a sample of normalised training images.
  virtual void init_from_data(const torch::Tensor& /*images*/) {}
};

// "simplecnn", "alexnet", "resnet23", "resnet20", "resnet56", "fastnet".
// Throws std::invalid_argument naming the known models for an unknown name.
std::shared_ptr<Classifier> make_model(const std::string& name, const ModelOptions& options);
std::vector<std::string> model_names();

// Number of parameter elements; `trainable_only` skips those with requires_grad() false.
int64_t parameter_count(const torch::nn::Module& model, bool trainable_only = true);

}  // namespace cifar::models
