// fastnet: the network of Keller Jordan's airbench94 (cifar10-airbench, airbench94.py): a frozen
// patch-whitening conv, three conv groups, a scaled linear head.
#include <torch/torch.h>

#include <stdexcept>
#include <string>

#include "models/zoo.h"

namespace cifar::models {
namespace {

namespace nn = torch::nn;

constexpr int64_t kWhiteningKernel = 2;
constexpr double kWhiteningEps = 5e-4;      // added to the eigenvalues before scaling
constexpr double kBatchNormMomentum = 0.6;  // airbench's convention: weight kept from the past
constexpr double kOutputScale = 1.0 / 9;

// airbench's Conv: 'same' padding and no bias, except the whitening conv (valid, with a bias).
// Any bias starts at zero and the first in_channels filters as identities (dirac): an implicit
// residual.
nn::Conv2d airbench_conv(int64_t in, int64_t out, int64_t kernel = 3, bool whitening = false) {
  // 'same' for the odd kernels used here is a symmetric kernel / 2.
  nn::Conv2d conv(
      nn::Conv2dOptions(in, out, kernel).padding(whitening ? 0 : kernel / 2).bias(whitening));
  torch::NoGradGuard no_grad;
  if (conv->bias.defined()) {
    conv->bias.zero_();
  }
  nn::init::dirac_(conv->weight.narrow(0, 0, in));
  return conv;
}

// airbench's BatchNorm: eps 1e-12, scale frozen at 1, only the shift trains. Torch's momentum
// weights the new batch, airbench's the running value.
nn::BatchNorm2d airbench_batch_norm(int64_t channels) {
  nn::BatchNorm2d norm(
      nn::BatchNorm2dOptions(channels).eps(1e-12).momentum(1 - kBatchNormMomentum));
  norm->weight.set_requires_grad(false);
  return norm;
}

class ConvGroupImpl : public nn::Module {
 public:
  ConvGroupImpl(int64_t in, int64_t out)
      : conv1_(register_module("conv1", airbench_conv(in, out))),
        norm1_(register_module("norm1", airbench_batch_norm(out))),
        conv2_(register_module("conv2", airbench_conv(out, out))),
        norm2_(register_module("norm2", airbench_batch_norm(out))) {}

  torch::Tensor forward(const torch::Tensor& x) {
    auto h = torch::gelu(norm1_(torch::max_pool2d(conv1_(x), 2)));
    return torch::gelu(norm2_(conv2_(h)));
  }

 private:
  nn::Conv2d conv1_;
  nn::BatchNorm2d norm1_;
  nn::Conv2d conv2_;
  nn::BatchNorm2d norm2_;
};
TORCH_MODULE(ConvGroup);

class FastNet : public Classifier {
 public:
  explicit FastNet(const ModelOptions& options) {
    // Side after whitening (valid 2x2), three 2x pools and the final 3x3 pool must be 1 for
    // the head's 256 inputs; 32 (CIFAR) and 28 (Fashion-MNIST) both do.
    const int64_t side = (options.image_size - kWhiteningKernel + 1) / 8 / 3;
    if (side != 1) {
      throw std::invalid_argument("fastnet needs images of 25 to 48 pixels a side, got " +
                                  std::to_string(options.image_size));
    }
    // Each whitening filter comes with its negation: 2 * C * k * k channels (24 for RGB).
    const int64_t whitening_width = 2 * options.in_channels * kWhiteningKernel * kWhiteningKernel;
    whiten_ = register_module("whiten", airbench_conv(options.in_channels, whitening_width,
                                                      kWhiteningKernel, /*whitening=*/true));
    whiten_->weight.set_requires_grad(false);  // set from the data, never trained
    constexpr int64_t kWidths[] = {64, 256, 256};
    group1_ = register_module("group1", ConvGroup(whitening_width, kWidths[0]));
    group2_ = register_module("group2", ConvGroup(kWidths[0], kWidths[1]));
    group3_ = register_module("group3", ConvGroup(kWidths[1], kWidths[2]));
    head_ = register_module(
        "head", nn::Linear(nn::LinearOptions(kWidths[2], options.num_classes).bias(false)));
  }

  torch::Tensor forward(torch::Tensor images) override {
    auto x = torch::gelu(whiten_(images));
    x = group3_(group2_(group1_(x)));
    x = torch::max_pool2d(x, 3).flatten(1);
    return head_(x) * kOutputScale;
  }

  // airbench's init_whitening_conv: the filters are the eigenvectors of the (uncentred) patch
  // covariance, largest first, each scaled by 1 / sqrt(eigenvalue + eps), then their negations.
  // On these patches the first half of the channels then has ~identity covariance.
  void init_from_data(const torch::Tensor& images) override {
    torch::NoGradGuard no_grad;
    auto& weight = whiten_->weight;
    const int64_t channels = weight.size(1);
    if (images.dim() != 4 || images.size(1) != channels || images.size(2) < kWhiteningKernel ||
        images.size(3) < kWhiteningKernel) {
      throw std::invalid_argument("fastnet init_from_data needs N x " + std::to_string(channels) +
                                  " x H x W images");
    }
    const int64_t k = kWhiteningKernel;
    // Every k x k patch as a row of C*k*k values (float, as airbench; eigh in double).
    const auto patches = images.to(weight.device(), torch::kFloat)
                             .unfold(2, k, 1)
                             .unfold(3, k, 1)
                             .transpose(1, 3)
                             .reshape({-1, channels * k * k});
    const auto covariance = (patches.t().mm(patches) / patches.size(0)).to(torch::kDouble);
    const auto [eigenvalues, eigenvectors] = torch::linalg_eigh(covariance, "U");
    const auto scale = (eigenvalues.flip({0}) + kWhiteningEps).rsqrt().unsqueeze(1);
    const auto filters =
        (eigenvectors.t().flip({0}) * scale).reshape({-1, channels, k, k}).to(weight.dtype());
    weight.copy_(torch::cat({filters, -filters}));
  }

 private:
  nn::Conv2d whiten_{nullptr};
  ConvGroup group1_{nullptr};
  ConvGroup group2_{nullptr};
  ConvGroup group3_{nullptr};
  nn::Linear head_{nullptr};
};

}  // namespace

std::shared_ptr<Classifier> make_fastnet(const ModelOptions& options) {
  return std::make_shared<FastNet>(options);
}

}  // namespace cifar::models
