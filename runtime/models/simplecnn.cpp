// simplecnn: the Keras examples' cifar10_cnn.py network (two conv blocks, a dense head).
#include <torch/torch.h>

#include <stdexcept>
#include <string>

#include "models/zoo.h"

namespace cifar::models {
namespace {

namespace nn = torch::nn;

class SimpleCnn : public Classifier {
 public:
  explicit SimpleCnn(const ModelOptions& options) {
    // 'same' convs keep the side, 'valid' 3x3 convs take 2 off, pooling halves (floored).
    const int64_t side = ((options.image_size - 2) / 2 - 2) / 2;
    if (side < 1) {
      throw std::invalid_argument("simplecnn needs images of at least 10x10, got " +
                                  std::to_string(options.image_size));
    }
    features_ = register_module(
        "features",
        nn::Sequential(nn::Conv2d(nn::Conv2dOptions(options.in_channels, 32, 3).padding(1)),
                       nn::ReLU(), nn::Conv2d(nn::Conv2dOptions(32, 32, 3)), nn::ReLU(),
                       nn::MaxPool2d(2), nn::Dropout(0.25),
                       nn::Conv2d(nn::Conv2dOptions(32, 64, 3).padding(1)), nn::ReLU(),
                       nn::Conv2d(nn::Conv2dOptions(64, 64, 3)), nn::ReLU(), nn::MaxPool2d(2),
                       nn::Dropout(0.25)));
    classifier_ = register_module(
        "classifier", nn::Sequential(nn::Flatten(), nn::Linear(64 * side * side, 512), nn::ReLU(),
                                     nn::Dropout(0.5), nn::Linear(512, options.num_classes)));
    init_like_keras();
  }

  torch::Tensor forward(torch::Tensor images) override {
    return classifier_->forward(features_->forward(images));
  }

 private:
  // Keras layers start from Glorot-uniform kernels and zero biases; torch's default differs.
  void init_like_keras() {
    torch::NoGradGuard no_grad;
    for (const auto& module : modules(/*include_self=*/false)) {
      if (auto* conv = module->as<nn::Conv2d>()) {
        nn::init::xavier_uniform_(conv->weight);
        nn::init::zeros_(conv->bias);
      } else if (auto* linear = module->as<nn::Linear>()) {
        nn::init::xavier_uniform_(linear->weight);
        nn::init::zeros_(linear->bias);
      }
    }
  }

  nn::Sequential features_{nullptr};
  nn::Sequential classifier_{nullptr};
};

}  // namespace

std::shared_ptr<Classifier> make_simplecnn(const ModelOptions& options) {
  return std::make_shared<SimpleCnn>(options);
}

}  // namespace cifar::models
