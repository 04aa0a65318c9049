// Internal to cifar_models: one factory per model file. Everyone else builds models by name
// through make_model (model.h), so this header is not installed or included outside the library.
#pragma once

#include <cstdint>
#include <memory>

#include "models/model.h"

namespace cifar::models {

std::shared_ptr<Classifier> make_simplecnn(const ModelOptions& options);
std::shared_ptr<Classifier> make_alexnet(const ModelOptions& options);
std::shared_ptr<Classifier> make_resnet23(const ModelOptions& options);
// He et al.'s CIFAR ResNets: depth = 6n + 2 (20, 32, 44, 56, 110, ...).
std::shared_ptr<Classifier> make_cifar_resnet(int64_t depth, const ModelOptions& options);
std::shared_ptr<Classifier> make_fastnet(const ModelOptions& options);

}  // namespace cifar::models
