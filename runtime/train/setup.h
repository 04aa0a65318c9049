// What every role that trains or evaluates sets up the same way: device, threads, loaders,
// metrics, batches as tensors, loss and evaluation. Shared by the single-process trainer, the
// parameter-server trainers and the evaluator.
#pragma once

#include <torch/types.h>

#include <memory>
#include <string>
#include <utility>

#include "data/loader.h"
#include "metrics/runtime_metrics.h"
#include "models/model.h"
#include "train/config.h"

namespace cifar::train {

torch::Device resolve_device(const std::string& name);  // throws std::invalid_argument
// Sets LibTorch's intra-op threads (it defaults to one on some machines); returns the count.
int configure_threads(const TrainConfig& config);
// Run name: checkpoint prefix and the metrics' job label.
std::string run_name(const TrainConfig& config);

// The metrics endpoint of this process, labelled with its role; a local distributed job offsets
// each process's port by its place in the job so that they do not collide.
std::unique_ptr<metrics::RuntimeMetrics> make_runtime_metrics(const TrainConfig& config);

data::LoaderOptions loader_options(const TrainConfig& config, const data::ChannelStats& stats,
                                   bool training);
// Wraps a loader batch as tensors without copying: the tensors share ownership of its buffers.
std::pair<torch::Tensor, torch::Tensor> to_tensors(data::Batch batch, torch::Device device);
torch::Tensor classification_loss(const torch::Tensor& logits, const torch::Tensor& labels,
                                  double label_smoothing);
// A sample of normalised training images for data-dependent initialisation (fastnet).
torch::Tensor init_sample(const std::shared_ptr<const data::Dataset>& train,
                          const data::ChannelStats& stats, torch::Device device);

struct Evaluation {
  double loss = 0;
  double accuracy = 0;
};
Evaluation evaluate(models::Classifier& model, data::DataLoader& loader, torch::Device device);

}  // namespace cifar::train
