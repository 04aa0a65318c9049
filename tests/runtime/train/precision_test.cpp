// --precision: what each value means on the CPU, and autocast's scope.
#include "train/precision.h"

#include <ATen/autocast_mode.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <stdexcept>
#include <string>

#include "contract/enum_names.h"

namespace cifar::train {
namespace {

std::string refusal(Precision precision, const torch::Device& device) {
  try {
    resolve_precision(precision, device);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "accepted";
}

TEST(Precision, OnTheCpuAutoIsFp32AndBf16IsKept) {
  EXPECT_EQ(resolve_precision(Precision::kAuto, torch::kCPU), Precision::kFp32);
  EXPECT_EQ(resolve_precision(Precision::kFp32, torch::kCPU), Precision::kFp32);
  EXPECT_EQ(resolve_precision(Precision::kBf16, torch::kCPU), Precision::kBf16);
}

TEST(Precision, Fp16OnTheCpuIsRefusedNamingBf16) {
  const auto message = refusal(Precision::kFp16, torch::kCPU);
  EXPECT_NE(message.find("CUDA"), std::string::npos) << message;
  EXPECT_NE(message.find("--precision bf16"), std::string::npos) << message;
}

TEST(Precision, TheNamesParseBothWays) {
  EXPECT_EQ(contract::parse_named(kPrecisionNames, "bf16", "precision"), Precision::kBf16);
  EXPECT_EQ(contract::name_of(kPrecisionNames, Precision::kFp16), "fp16");
  EXPECT_THROW(contract::parse_named(kPrecisionNames, "fp8", "precision"), std::invalid_argument);
}

torch::Tensor convolve(const torch::Tensor& input, const torch::Tensor& weight) {
  return torch::conv2d(input, weight, {}, 1, 1);
}

TEST(Precision, Bf16ScopeRunsConvolutionsInBf16OnlyWhileItLives) {
  torch::manual_seed(0);
  const auto input = torch::randn({2, 3, 8, 8});
  const auto weight = torch::randn({4, 3, 3, 3}, torch::requires_grad());
  torch::Tensor inside;
  {
    const AutocastScope autocast(Precision::kBf16, torch::kCPU);
    EXPECT_TRUE(at::autocast::is_cpu_enabled());
    inside = convolve(input, weight);
    EXPECT_EQ(inside.scalar_type(), torch::kBFloat16);
  }
  EXPECT_FALSE(at::autocast::is_cpu_enabled());
  const auto outside = convolve(input, weight);
  EXPECT_EQ(outside.scalar_type(), torch::kFloat);
  // The same result to bf16's 8 bits of mantissa, and the gradient reaches the fp32 weight as
  // fp32, close to the one an fp32 forward pass gives.
  EXPECT_TRUE(torch::allclose(inside.to(torch::kFloat), outside, 0.05, 0.1));
  inside.to(torch::kFloat).sum().backward();
  ASSERT_TRUE(weight.grad().defined());
  EXPECT_EQ(weight.grad().scalar_type(), torch::kFloat);
  const auto fp32_weight = weight.detach().clone().requires_grad_();
  convolve(input, fp32_weight).sum().backward();
  EXPECT_TRUE(torch::allclose(weight.grad(), fp32_weight.grad(), 0.05, 0.5));
}

TEST(Precision, Fp32ScopeChangesNothingAndScopesNest) {
  const auto input = torch::randn({1, 3, 8, 8});
  const auto weight = torch::randn({4, 3, 3, 3});
  {
    const AutocastScope none(Precision::kFp32, torch::kCPU);
    EXPECT_FALSE(at::autocast::is_cpu_enabled());
    EXPECT_EQ(convolve(input, weight).scalar_type(), torch::kFloat);
  }
  {
    const AutocastScope outer(Precision::kBf16, torch::kCPU);
    {
      const AutocastScope inner(Precision::kBf16, torch::kCPU);
      EXPECT_EQ(convolve(input, weight).scalar_type(), torch::kBFloat16);
    }
    EXPECT_TRUE(at::autocast::is_cpu_enabled());  // the inner scope restored the outer's state
    EXPECT_EQ(convolve(input, weight).scalar_type(), torch::kBFloat16);
  }
  EXPECT_FALSE(at::autocast::is_cpu_enabled());
}

}  // namespace
}  // namespace cifar::train
