#include "distributed/allreduce/gradient_buckets.h"

#include <fmt/format.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/torch.h>

#include <stdexcept>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <utility>

#include "metrics/runtime_metrics.h"
#include "metrics/seconds_since.h"

namespace cifar::allreduce {
namespace {

using Clock = std::chrono::steady_clock;
using metrics::seconds_since;

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
      grad_views_(parameters.size()),
      group_(std::move(group)),
      options_(std::move(options)),
      metrics_(metrics),
      bucket_of_(parameters.size()),
      ready_(parameters.size(), false) {
  torch::NoGradGuard no_grad;
  std::vector<int64_t> bytes;
  bytes.reserve(parameters_.size());
  for (const auto& p : parameters_) bytes.push_back(static_cast<int64_t>(p.nbytes()));
  for (auto& members : assign_buckets(bytes, options_.first_cap_bytes, options_.cap_bytes)) {
    int64_t elements = 0;
    for (const auto p : members) elements += parameters_[p].numel();
    Bucket bucket;
    bucket.flat = torch::zeros({elements}, parameters_.front().options().requires_grad(false));
    int64_t offset = 0;
    for (const auto p : members) {
      bucket_of_[p] = buckets_.size();
      // The bucket's memory, but not an autograd view of it: the optimizer's zero_grad() may
      // detach_() a .grad() in place, which views refuse.
      grad_views_[p] = torch::empty({0}, bucket.flat.options())
                           .set_(bucket.flat.storage(), offset, parameters_[p].sizes());
      offset += parameters_[p].numel();
    }
    bucket.parameters = std::move(members);
    bytes_ += static_cast<int64_t>(bucket.flat.nbytes());
    buckets_.push_back(std::move(bucket));
  }
  for (size_t b = 0; b < buckets_.size(); ++b) {
    buckets_[b].description = fmt::format("gradient all-reduce, bucket {} of {} ({} values)", b + 1,
                                          buckets_.size(), buckets_[b].flat.numel());
  }
  for (size_t p = 0; p < parameters_.size(); ++p) {
    point_grad_into_bucket(p);
    // After AccumulateGrad has added this step's gradient into the view: the engine runs the
    // node once per backward, with the gradient summed over every use of the parameter.
    auto accumulator = torch::autograd::impl::grad_accumulator(parameters_[p]);
    const auto key =
        accumulator->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
            [this, p](const torch::autograd::variable_list& outputs,
                      const torch::autograd::variable_list& /*inputs*/) {
              on_gradient_ready(p);
              return outputs;
            }));
    hooks_.emplace_back(std::move(accumulator), key);
  }
}

GradientBuckets::~GradientBuckets() {
  for (auto& [accumulator, key] : hooks_) accumulator->del_post_hook(key);
}

void GradientBuckets::point_grad_into_bucket(size_t p) {
  auto& grad = parameters_[p].mutable_grad();
  if (grad.defined() && grad.data_ptr() == grad_views_[p].data_ptr()) return;
  torch::NoGradGuard no_grad;
  if (grad.defined()) {
    grad_views_[p].copy_(grad);
  } else {
    grad_views_[p].zero_();
  }
  grad = grad_views_[p];
}

void GradientBuckets::begin_backward() {
  for (auto& b : buckets_) {
    b.missing = b.parameters.size();
    b.work.reset();
  }
  for (size_t p = 0; p < parameters_.size(); ++p) point_grad_into_bucket(p);
  std::fill(ready_.begin(), ready_.end(), false);
  next_to_start_ = 0;
}

void GradientBuckets::on_gradient_ready(size_t parameter) {
  auto& bucket = buckets_[bucket_of_[parameter]];
  if (bucket.work) {
    throw std::logic_error("a gradient arrived for a bucket already being all-reduced");
  }
  if (ready_[parameter]) return;
  ready_[parameter] = true;
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
  torch::NoGradGuard no_grad;
  for (size_t b = next_to_start_; b < buckets_.size(); ++b) start(b);
  for (auto& bucket : buckets_)
    wait_for_peers(*group_, bucket.work, options_.wait, bucket.description);
  const double wait = seconds_since(backward_done);
  const double span = seconds_since(first_started_);
  totals_.steps += 1;
  totals_.bytes += bytes_;
  totals_.in_flight_seconds += span;
  totals_.wait_seconds += wait;
  if (metrics_ != nullptr) metrics_->record_allreduce(bytes_, span, wait);
}

}  // namespace cifar::allreduce
