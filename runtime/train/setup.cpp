#include "train/setup.h"

#include <spdlog/spdlog.h>
#include <torch/cuda.h>
#include <torch/nn/functional/loss.h>
#include <torch/torch.h>

#include <algorithm>
#include <stdexcept>
#include <thread>

namespace cifar::train {

torch::Device resolve_device(const std::string& name) {
  if (name == "cpu") return torch::kCPU;
  if (name == "cuda" || name.rfind("cuda:", 0) == 0) {
    if (!torch::cuda::is_available()) {
      throw std::invalid_argument("-c cuda: no CUDA device is available to this build");
    }
    const torch::Device device(name);  // "cuda:N": a data-parallel rank's own GPU
    const auto count = static_cast<int64_t>(torch::cuda::device_count());
    if (device.has_index() && device.index() >= count) {
      throw std::invalid_argument("device " + name + ": this machine has " +
                                  std::to_string(count) + " CUDA device(s)");
    }
    return device;
  }
  throw std::invalid_argument("unknown device '" + name + "' (cpu, cuda)");
}

// Wraps a loader batch as tensors without copying: the tensors share ownership of its buffers.
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

torch::Tensor classification_loss(const torch::Tensor& logits, const torch::Tensor& labels,
                                  double label_smoothing) {
  namespace F = torch::nn::functional;
  return F::cross_entropy(logits, labels,
                          F::CrossEntropyFuncOptions().label_smoothing(label_smoothing));
}

Evaluation evaluate(models::Classifier& model, data::DataLoader& loader, torch::Device device) {
  torch::NoGradGuard no_grad;
  model.eval();
  double loss_sum = 0;
  int64_t correct = 0;
  int64_t seen = 0;
  loader.start_epoch(0);
  while (auto batch = loader.next()) {
    auto [images, labels] = to_tensors(std::move(*batch), device);
    auto logits = model.forward(images);
    namespace F = torch::nn::functional;
    loss_sum +=
        F::cross_entropy(logits, labels, F::CrossEntropyFuncOptions().reduction(torch::kSum))
            .item<double>();
    correct += logits.argmax(1).eq(labels).sum().item<int64_t>();
    seen += labels.size(0);
  }
  model.train();
  if (seen == 0) return {};
  return {loss_sum / static_cast<double>(seen),
          static_cast<double>(correct) / static_cast<double>(seen)};
}

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
  return o;
}

// A sample of normalised training images for data-dependent initialisation (fastnet).
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

std::string run_name(const TrainConfig& config) {
  return config.name.empty() ? config.model : config.name;
}

int configure_threads(const TrainConfig& config) {
  const int threads =
      config.threads > 0 ? config.threads : static_cast<int>(std::thread::hardware_concurrency());
  torch::set_num_threads(std::max(threads, 1));
  return std::max(threads, 1);
}

std::unique_ptr<metrics::RuntimeMetrics> make_runtime_metrics(const TrainConfig& config) {
  metrics::Identity identity{run_name(config), "master", "0"};
  int port = config.metrics_port;
  const auto& dist = config.distributed;
  if (dist.enabled) {
    identity.role = cluster::role_name(dist.job.role);
    identity.index = std::to_string(dist.job.index);
    if (dist.local && port > 0) port += cluster::local_port_offset(dist.job);
    // Ranks that share a machine (launch -n N, mpirun) each get their own port.
    if (dist.strategy == "allreduce" && port > 0) port += dist.allreduce.local_rank;
  }
  std::string bind;
  if (port >= 0) bind = config.metrics_bind + ":" + std::to_string(port);
  auto metrics = std::make_unique<metrics::RuntimeMetrics>(identity, bind);
  if (metrics->port() != 0) spdlog::info("metrics on :{}/metrics", metrics->port());
  return metrics;
}

}  // namespace cifar::train
