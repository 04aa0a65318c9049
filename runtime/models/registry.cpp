// make_model: the one way to build a network by name.
#include <fmt/ranges.h>
#include <torch/torch.h>

#include <functional>
#include <stdexcept>
#include <utility>

#include "models/model.h"
#include "models/zoo.h"

namespace cifar::models {
namespace {

using Factory = std::function<std::shared_ptr<Classifier>(const ModelOptions&)>;

// Ordered as model_names() lists them (and as error messages name them).
const std::vector<std::pair<std::string, Factory>>& registry() {
  static const std::vector<std::pair<std::string, Factory>> kModels = {
      {"simplecnn", make_simplecnn},
      {"alexnet", make_alexnet},
      {"resnet23", make_resnet23},
      {"resnet20", [](const ModelOptions& o) { return make_cifar_resnet(20, o); }},
      {"resnet56", [](const ModelOptions& o) { return make_cifar_resnet(56, o); }},
      {"fastnet", make_fastnet},
  };
  return kModels;
}

void check_options(const ModelOptions& options) {
  if (options.num_classes < 1 || options.in_channels < 1 || options.image_size < 1) {
    throw std::invalid_argument(
        "model options must be positive: num_classes=" + std::to_string(options.num_classes) +
        ", in_channels=" + std::to_string(options.in_channels) +
        ", image_size=" + std::to_string(options.image_size));
  }
}

}  // namespace

std::shared_ptr<Classifier> make_model(const std::string& name, const ModelOptions& options) {
  for (const auto& [known, factory] : registry()) {
    if (known == name) {
      check_options(options);
      return factory(options);
    }
  }
  throw std::invalid_argument(
      fmt::format("unknown model '{}'; known models: {}", name, fmt::join(model_names(), ", ")));
}

std::vector<std::string> model_names() {
  std::vector<std::string> names;
  for (const auto& entry : registry()) {
    names.push_back(entry.first);
  }
  return names;
}

int64_t parameter_count(const torch::nn::Module& model, bool trainable_only) {
  int64_t count = 0;
  for (const auto& parameter : model.parameters(/*recurse=*/true)) {
    if (!trainable_only || parameter.requires_grad()) {
      count += parameter.numel();
    }
  }
  return count;
}

}  // namespace cifar::models
