// resnet20 / resnet56: He et al. 2016's CIFAR ResNets (section 4.2) as in akamaster's
// pytorch_resnet_cifar10: 3 stages of n basic blocks at 16/32/64 channels, option A shortcuts.
#include <torch/torch.h>

#include <stdexcept>
#include <string>

#include "models/zoo.h"

namespace cifar::models {
namespace {

namespace nn = torch::nn;

nn::Conv2d conv3x3(int64_t in, int64_t out, int64_t stride) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, 3).stride(stride).padding(1).bias(false));
}

class BasicBlockImpl : public nn::Module {
 public:
  BasicBlockImpl(int64_t in, int64_t planes, int64_t stride)
      : conv1_(register_module("conv1", conv3x3(in, planes, stride))),
        bn1_(register_module("bn1", nn::BatchNorm2d(planes))),
        conv2_(register_module("conv2", conv3x3(planes, planes, 1))),
        bn2_(register_module("bn2", nn::BatchNorm2d(planes))),
        // Option A: parameter-free, so the paper's parameter counts hold.
        pad_channels_(stride != 1 || in != planes ? planes / 4 : -1) {}

  torch::Tensor forward(const torch::Tensor& x) {
    auto out = torch::relu(bn1_(conv1_(x)));
    out = bn2_(conv2_(out));
    return torch::relu(out + shortcut(x));
  }

 private:
  // Option A identity shortcut: subsample by 2, zero-pad the new channels on both sides.
  torch::Tensor shortcut(const torch::Tensor& x) const {
    if (pad_channels_ < 0) {
      return x;
    }
    const auto subsampled = x.slice(2, 0, c10::nullopt, 2).slice(3, 0, c10::nullopt, 2);
    return torch::constant_pad_nd(subsampled, {0, 0, 0, 0, pad_channels_, pad_channels_});
  }

  nn::Conv2d conv1_;
  nn::BatchNorm2d bn1_;
  nn::Conv2d conv2_;
  nn::BatchNorm2d bn2_;
  int64_t pad_channels_;
};
TORCH_MODULE(BasicBlock);

class CifarResNet : public Classifier {
 public:
  CifarResNet(int64_t blocks_per_stage, const ModelOptions& options) {
    conv1_ = register_module("conv1", conv3x3(options.in_channels, 16, 1));
    bn1_ = register_module("bn1", nn::BatchNorm2d(16));
    int64_t in = 16;
    for (const int64_t planes : {16, 32, 64}) {
      nn::Sequential stage;
      for (int64_t block = 0; block < blocks_per_stage; ++block) {
        const int64_t stride = (block == 0 && planes != 16) ? 2 : 1;
        stage->push_back(BasicBlock(in, planes, stride));
        in = planes;
      }
      stages_.emplace_back(register_module("layer" + std::to_string(stages_.size() + 1), stage));
    }
    linear_ = register_module("linear", nn::Linear(64, options.num_classes));
    // akamaster's _weights_init: Kaiming-normal conv and linear weights (biases keep defaults).
    torch::NoGradGuard no_grad;
    for (const auto& module : modules(/*include_self=*/false)) {
      if (auto* conv = module->as<nn::Conv2d>()) {
        nn::init::kaiming_normal_(conv->weight);
      } else if (auto* linear = module->as<nn::Linear>()) {
        nn::init::kaiming_normal_(linear->weight);
      }
    }
  }

  torch::Tensor forward(torch::Tensor images) override {
    auto out = torch::relu(bn1_(conv1_(images)));
    for (auto& stage : stages_) {
      out = stage->forward(out);
    }
    out = torch::adaptive_avg_pool2d(out, {1, 1}).flatten(1);
    return linear_(out);
  }

 private:
  nn::Conv2d conv1_{nullptr};
  nn::BatchNorm2d bn1_{nullptr};
  std::vector<nn::Sequential> stages_;
  nn::Linear linear_{nullptr};
};

}  // namespace

std::shared_ptr<Classifier> make_cifar_resnet(int64_t depth, const ModelOptions& options) {
  if (depth < 8 || (depth - 2) % 6 != 0) {
    throw std::invalid_argument("CIFAR ResNet depth must be 6n + 2, got " + std::to_string(depth));
  }
  return std::make_shared<CifarResNet>((depth - 2) / 6, options);
}

}  // namespace cifar::models
