#include "train/batches.h"

#include <torch/torch.h>

#include <algorithm>

namespace cifar::train {

data::LoaderOptions loader_options(const TrainConfig& config, const data::ChannelStats& stats,
                                   bool training) {
  data::LoaderOptions o;
  o.batch_size = training ? config.batch_size : std::max<int64_t>(config.batch_size, 256);
  o.shuffle = training;
  o.augment = training && config.augment;
  // A last batch of a handful of images would give BatchNorm a noisy step; it is reshuffled in.
  o.drop_last = training;
  o.augmentation.normalize = stats;
  o.seed = config.seed;
  o.num_workers = config.loader_workers;
  if (training) o.global_batch = config.global_batch;
  return o;
}

std::pair<torch::Tensor, torch::Tensor> to_tensors(data::Batch batch, torch::Device device) {
  auto owner = std::make_shared<data::Batch>(std::move(batch));
  auto keep_alive = [owner](void* /*unused*/) {};
  auto images = torch::from_blob(owner->images.data(),
                                 {owner->size, owner->channels, owner->height, owner->width},
                                 keep_alive, torch::kFloat32);
  auto labels = torch::from_blob(owner->labels.data(), {owner->size}, keep_alive, torch::kInt64);
  if (device.is_cpu()) return {images, labels};
  return {images.to(device, /*non_blocking=*/true), labels.to(device, /*non_blocking=*/true)};
}

torch::Tensor init_sample(const std::shared_ptr<const data::Dataset>& train,
                          const data::ChannelStats& stats, torch::Device device) {
  data::LoaderOptions o;
  o.batch_size = std::min<int64_t>(train->size(), 5000);
  o.shuffle = false;
  o.augment = false;
  o.augmentation.normalize = stats;
  o.num_workers = 1;
  data::DataLoader loader(train, o);
  loader.start_epoch(0);
  auto batch = loader.next();
  return to_tensors(std::move(*batch), device).first.clone();
}

}  // namespace cifar::train
