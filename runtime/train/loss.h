// The training loss, and the loss and accuracy on a test set.
#pragma once

#include <torch/types.h>

#include "data/loader.h"
#include "models/model.h"

namespace cifar::train {

torch::Tensor classification_loss(const torch::Tensor& logits, const torch::Tensor& labels,
                                  double label_smoothing);

struct Evaluation {
  double loss = 0;
  double accuracy = 0;
};
Evaluation evaluate(models::Classifier& model, data::DataLoader& loader, torch::Device device);

}  // namespace cifar::train
