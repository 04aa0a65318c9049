// From the data loader to tensors: the loaders' options, batches wrapped as tensors, and the
// sample that data-dependent initialisation looks at.
#pragma once

#include <torch/types.h>

#include <memory>
#include <utility>

#include "config/train_config.h"
#include "data/loader.h"

namespace cifar::train {

data::LoaderOptions loader_options(const TrainConfig& config, const data::ChannelStats& stats,
                                   bool training);
// Wraps a loader batch as tensors without copying: the tensors share ownership of its buffers.
std::pair<torch::Tensor, torch::Tensor> to_tensors(data::Batch batch, torch::Device device);
// A sample of normalised training images for data-dependent initialisation (fastnet).
torch::Tensor init_sample(const std::shared_ptr<const data::Dataset>& train,
                          const data::ChannelStats& stats, torch::Device device);

}  // namespace cifar::train
