#include "dist/allreduce/gradient_buckets.h"

#include <torch/torch.h>

#include <stdexcept>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <utility>

#include "metrics/runtime_metrics.h"

namespace cifar::allreduce {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

std::vector<std::vector<size_t>> assign_buckets(const std::vector<int64_t>& parameter_bytes,
                                                int64_t first_cap_bytes, int64_t cap_bytes) {
  std::vector<std::vector<size_t>> buckets;
  int64_t filled = 0;
  for (size_t i = parameter_bytes.size(); i-- > 0;) {
    const int64_t cap = buckets.size() <= 1 ? first_cap_bytes : cap_bytes;
    if (buckets.empty() || (filled > 0 && filled + parameter_bytes[i] > cap)) {
      buckets.emplace_back();
      filled = 0;
    }
    buckets.back().push_back(i);
    filled += parameter_bytes[i];
  }
  return buckets;
}

GradientBuckets::GradientBuckets(const std::vector<torch::Tensor>& parameters,
                                 c10::intrusive_ptr<c10d::ProcessGroup> group,
                                 BucketOptions options, metrics::RuntimeMetrics* metrics)
    : parameters_(parameters),
      group_(std::move(group)),
      options_(options),
      metrics_(metrics),
      where_(parameters.size()),
      filled_(parameters.size(), false) {
  std::vector<int64_t> bytes;
  bytes.reserve(parameters_.size());
  for (const auto& p : parameters_) bytes.push_back(static_cast<int64_t>(p.nbytes()));
  for (auto& members : assign_buckets(bytes, options_.first_cap_bytes, options_.cap_bytes)) {
    Bucket bucket;
    int64_t elements = 0;
    for (size_t k = 0; k < members.size(); ++k) {
      const auto p = members[k];
      where_[p] = {buckets_.size(), k};
      bucket.offsets.push_back(elements);
      elements += parameters_[p].numel();
    }
    bucket.parameters = std::move(members);
    bucket.flat = torch::zeros({elements}, parameters_.front().options().requires_grad(false));
    bytes_ += static_cast<int64_t>(bucket.flat.nbytes());
    buckets_.push_back(std::move(bucket));
  }
  for (size_t p = 0; p < parameters_.size(); ++p) {
    hooks_.push_back(parameters_[p].register_hook(
        [this, p](const torch::Tensor& grad) { on_gradient(p, grad); }));
  }
}

GradientBuckets::~GradientBuckets() {
  for (size_t p = 0; p < parameters_.size(); ++p) parameters_[p].remove_hook(hooks_[p]);
}

void GradientBuckets::begin_backward() {
  for (auto& b : buckets_) {
    b.missing = b.parameters.size();
    b.work.reset();
  }
  std::fill(filled_.begin(), filled_.end(), false);
  next_to_start_ = 0;
}

void GradientBuckets::on_gradient(size_t parameter, const torch::Tensor& grad) {
  const auto [b, k] = where_[parameter];
  auto& bucket = buckets_[b];
  if (bucket.work) {
    throw std::logic_error("a gradient arrived for a bucket already being all-reduced");
  }
  torch::NoGradGuard no_grad;
  auto slot = bucket.flat.narrow(0, bucket.offsets[k], grad.numel());
  if (filled_[parameter]) {
    slot.add_(grad.reshape({-1}));  // a parameter used twice in the graph
    return;
  }
  slot.copy_(grad.reshape({-1}));
  filled_[parameter] = true;
  if (--bucket.missing == 0 && options_.overlap) start_ready_buckets();
}

void GradientBuckets::start(size_t b) {
  auto& bucket = buckets_[b];
  if (next_to_start_ == 0) first_started_ = Clock::now();
  // The mean: divide before the sum, as DDP does, so the sum cannot overflow in low precision.
  bucket.flat.div_(group_->getSize());
  std::vector<torch::Tensor> tensors{bucket.flat};
  bucket.work = group_->allreduce(tensors);
  next_to_start_ = b + 1;
}

void GradientBuckets::start_ready_buckets() {
  while (next_to_start_ < buckets_.size() && buckets_[next_to_start_].missing == 0) {
    start(next_to_start_);
  }
}

void GradientBuckets::end_backward() {
  const auto backward_done = Clock::now();
  // Parameters that got no gradient this step (unused branches) count as zero, on every rank.
  for (size_t b = next_to_start_; b < buckets_.size(); ++b) {
    auto& bucket = buckets_[b];
    for (size_t k = 0; k < bucket.parameters.size(); ++k) {
      const auto p = bucket.parameters[k];
      if (!filled_[p]) bucket.flat.narrow(0, bucket.offsets[k], parameters_[p].numel()).zero_();
    }
    start(b);
  }
  for (auto& bucket : buckets_) {
    try {
      bucket.work->wait(options_.timeout);
    } catch (const std::exception& e) {
      throw std::runtime_error(
          "gradient all-reduce failed (rank " + std::to_string(group_->getRank()) + " of " +
          std::to_string(group_->getSize()) + "): another rank died or did not answer within " +
          std::to_string(options_.timeout.count() / 1000.0) + " s: " + e.what());
    }
  }
  const double wait = seconds_since(backward_done);
  const double span = seconds_since(first_started_);
  torch::NoGradGuard no_grad;
  for (auto& bucket : buckets_) {
    for (size_t k = 0; k < bucket.parameters.size(); ++k) {
      auto& param = parameters_[bucket.parameters[k]];
      const auto mean = bucket.flat.narrow(0, bucket.offsets[k], param.numel()).view_as(param);
      if (param.grad().defined()) {
        param.mutable_grad().copy_(mean);
      } else {
        param.mutable_grad() = mean.clone();
      }
    }
  }
  if (metrics_ != nullptr) metrics_->record_allreduce(bytes_, span, wait);
}

}  // namespace cifar::allreduce
