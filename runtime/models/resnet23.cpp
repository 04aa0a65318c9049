// resnet23: nnabla-examples' CIFAR-10 ResNet-23 (image-classification/cifar10-100, models.py
// resnet23_prediction, as classification.py builds it for cifar10: 64 maps, ReLU).
#include <torch/torch.h>

#include "models/zoo.h"

namespace cifar::models {
namespace {

namespace nn = torch::nn;

// nnabla's PF.batch_normalization defaults (decay 0.9, eps 1e-5) are torch's defaults too.
nn::Conv2d conv(int64_t in, int64_t out, int64_t kernel) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, kernel).padding(kernel / 2).bias(false));
}

// Bottleneck unit: 1x1 to C/2, 3x3, 1x1 back to C, BN after each conv, identity added before
// the last activation, then an optional 2x2 max pooling (nnabla's res_unit with dn=True).
class ResUnitImpl : public nn::Module {
 public:
  ResUnitImpl(int64_t channels, bool downsample)
      : conv1_(register_module("conv1", conv(channels, channels / 2, 1))),
        bn1_(register_module("bn1", nn::BatchNorm2d(channels / 2))),
        conv2_(register_module("conv2", conv(channels / 2, channels / 2, 3))),
        bn2_(register_module("bn2", nn::BatchNorm2d(channels / 2))),
        conv3_(register_module("conv3", conv(channels / 2, channels, 1))),
        bn3_(register_module("bn3", nn::BatchNorm2d(channels))),
        downsample_(downsample) {}

  torch::Tensor forward(const torch::Tensor& x) {
    auto h = torch::relu(bn1_(conv1_(x)));
    h = torch::relu(bn2_(conv2_(h)));
    h = torch::relu(bn3_(conv3_(h)) + x);
    return downsample_ ? torch::max_pool2d(h, 2, 2) : h;
  }

 private:
  nn::Conv2d conv1_;
  nn::BatchNorm2d bn1_;
  nn::Conv2d conv2_;
  nn::BatchNorm2d bn2_;
  nn::Conv2d conv3_;
  nn::BatchNorm2d bn3_;
  bool downsample_;
};
TORCH_MODULE(ResUnit);

class ResNet23 : public Classifier {
 public:
  explicit ResNet23(const ModelOptions& options) {
    constexpr int64_t kMaps = 64;
    conv1_ = register_module("conv1", conv(options.in_channels, kMaps, 3));
    bn1_ = register_module("bn1", nn::BatchNorm2d(kMaps));
    // nnabla's scopes conv2..conv8; every second unit halves the side (32 -> 16 -> 8 -> 4).
    for (int unit = 0; unit < 7; ++unit) {
      units_->push_back(ResUnit(kMaps, /*downsample=*/unit % 2 == 1));
    }
    register_module("units", units_);
    affine_ = register_module("affine", nn::Linear(kMaps, options.num_classes));
    init_like_nnabla();
  }

  torch::Tensor forward(torch::Tensor images) override {
    auto h = units_->forward(torch::relu(bn1_(conv1_(images))));
    // nnabla pools 4x4, i.e. globally at 32x32; global pooling keeps other sides working.
    h = torch::adaptive_avg_pool2d(h, {1, 1}).flatten(1);
    return affine_(h);
  }

 private:
  // nnabla (>= 1.3) initialises convolution and affine weights Glorot-uniform, biases zero.
  void init_like_nnabla() {
    torch::NoGradGuard no_grad;
    for (const auto& module : modules(/*include_self=*/false)) {
      if (auto* c = module->as<nn::Conv2d>()) {
        nn::init::xavier_uniform_(c->weight);
      } else if (auto* linear = module->as<nn::Linear>()) {
        nn::init::xavier_uniform_(linear->weight);
        nn::init::zeros_(linear->bias);
      }
    }
  }

  nn::Conv2d conv1_{nullptr};
  nn::BatchNorm2d bn1_{nullptr};
  nn::Sequential units_;
  nn::Linear affine_{nullptr};
};

}  // namespace

std::shared_ptr<Classifier> make_resnet23(const ModelOptions& options) {
  return std::make_shared<ResNet23>(options);
}

}  // namespace cifar::models
