#include "train/loss.h"

#include <torch/nn/functional/loss.h>
#include <torch/torch.h>

#include "health/heartbeat.h"
#include "train/batches.h"

namespace cifar::train {

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
    health::note_progress();  // evaluating is progress: a long evaluation is no stall
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

}  // namespace cifar::train
