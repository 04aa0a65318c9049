// alexnet: the TensorFlow CIFAR-10 tutorial's network (cifar10.py, inference()), which trains
// on 24x24 crops; other sides only change the flattened size feeding local3.
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "models/zoo.h"

namespace cifar::models {
namespace {

namespace nn = torch::nn;

// tf.nn.max_pool(ksize 3, strides 2, padding 'SAME'): pads only as much as the output
// ceil(n / 2) needs, the odd pixel at the bottom/right, and padding never wins the max.
// Torch's symmetric padding would shift the windows, so pad explicitly with -inf.
torch::Tensor max_pool_tf_same(const torch::Tensor& x) {
  constexpr int64_t kSize = 3;
  constexpr int64_t kStride = 2;
  const auto padding = [](int64_t side) {
    const int64_t out = (side + kStride - 1) / kStride;
    return std::max<int64_t>((out - 1) * kStride + kSize - side, 0);
  };
  const int64_t ph = padding(x.size(2));
  const int64_t pw = padding(x.size(3));
  const auto padded = torch::constant_pad_nd(x, {pw / 2, pw - pw / 2, ph / 2, ph - ph / 2},
                                             -std::numeric_limits<double>::infinity());
  return torch::max_pool2d(padded, kSize, kStride);
}

// tf.truncated_normal_initializer: a normal cut at two standard deviations (sampled by
// inverting the CDF, as torch.nn.init.trunc_normal_ does).
void truncated_normal_(torch::Tensor& tensor, double stddev) {
  const double bound = std::erf(std::sqrt(2.0));  // 2 * Phi(2) - 1
  tensor.uniform_(-bound, bound).erfinv_().mul_(stddev * std::sqrt(2.0));
  tensor.clamp_(-2.0 * stddev, 2.0 * stddev);
}

// Side after a TF-SAME stride-2 pooling.
int64_t pooled(int64_t side) { return (side + 1) / 2; }

class AlexNet : public Classifier {
 public:
  explicit AlexNet(const ModelOptions& options) {
    const int64_t side = pooled(pooled(options.image_size));
    // Layer names follow the tutorial's variable scopes.
    conv1_ = register_module("conv1",
                             nn::Conv2d(nn::Conv2dOptions(options.in_channels, 64, 5).padding(2)));
    norm1_ = register_module("norm1", make_lrn());
    conv2_ = register_module("conv2", nn::Conv2d(nn::Conv2dOptions(64, 64, 5).padding(2)));
    norm2_ = register_module("norm2", make_lrn());
    local3_ = register_module("local3", nn::Linear(64 * side * side, 384));
    local4_ = register_module("local4", nn::Linear(384, 192));
    softmax_linear_ = register_module("softmax_linear", nn::Linear(192, options.num_classes));
    init_like_tutorial();
  }

  torch::Tensor forward(torch::Tensor images) override {
    auto x = norm1_(max_pool_tf_same(torch::relu(conv1_(images))));
    x = max_pool_tf_same(norm2_(torch::relu(conv2_(x))));
    x = torch::relu(local3_(x.flatten(1)));
    x = torch::relu(local4_(x));
    return softmax_linear_(x);
  }

 private:
  // tf.nn.lrn(depth_radius=4, bias=1, alpha=0.001/9, beta=0.75). Torch sums over size = 2r+1
  // channels and divides alpha by size, so the same normalisation takes alpha * size.
  static nn::LocalResponseNorm make_lrn() {
    constexpr int64_t kRadius = 4;
    constexpr int64_t kSize = 2 * kRadius + 1;
    return nn::LocalResponseNorm(
        nn::LocalResponseNormOptions(kSize).alpha(0.001 / 9.0 * kSize).beta(0.75).k(1.0));
  }

  // The tutorial's initialisers: truncated normals, biases 0 or 0.1.
  void init_like_tutorial() {
    torch::NoGradGuard no_grad;
    const auto init = [](torch::Tensor& weight, double stddev, torch::Tensor& bias,
                         double bias_value) {
      truncated_normal_(weight, stddev);
      bias.fill_(bias_value);
    };
    init(conv1_->weight, 5e-2, conv1_->bias, 0.0);
    init(conv2_->weight, 5e-2, conv2_->bias, 0.1);
    init(local3_->weight, 0.04, local3_->bias, 0.1);
    init(local4_->weight, 0.04, local4_->bias, 0.1);
    init(softmax_linear_->weight, 1 / 192.0, softmax_linear_->bias, 0.0);
  }

  nn::Conv2d conv1_{nullptr};
  nn::LocalResponseNorm norm1_{nullptr};
  nn::Conv2d conv2_{nullptr};
  nn::LocalResponseNorm norm2_{nullptr};
  nn::Linear local3_{nullptr};
  nn::Linear local4_{nullptr};
  nn::Linear softmax_linear_{nullptr};
};

}  // namespace

std::shared_ptr<Classifier> make_alexnet(const ModelOptions& options) {
  return std::make_shared<AlexNet>(options);
}

}  // namespace cifar::models
