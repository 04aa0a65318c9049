// The threaded loader. Workers claim batch numbers in order within a bounded window ahead of the
// consumer, build them without holding the lock, and park them in a map until their turn; every
// random choice is a function of (seed, epoch, position), so which thread builds a batch and when
// never changes its contents.
#include "data/loader.h"

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <map>
#include <mutex>
#include <numeric>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

#include "data/augment.h"
#include "data/random.h"

namespace cifar::data {
namespace {

// Domain tags keep the permutation and augmentation streams independent of each other.
constexpr uint64_t kPermutationTag = 0x7065726d75746174ULL;   // "permutat"
constexpr uint64_t kAugmentationTag = 0x6175676d656e7461ULL;  // "augmenta"

uint64_t epoch_key(uint64_t seed, int64_t epoch) {
  return hash_combine(mix64(seed), static_cast<uint64_t>(epoch));
}

std::shared_ptr<const Dataset> checked(std::shared_ptr<const Dataset> data) {
  if (!data) throw std::invalid_argument("DataLoader: null dataset");
  if (data->channels <= 0 || data->height <= 0 || data->width <= 0) {
    throw std::invalid_argument("DataLoader: dataset '" + data->name + "' has a bad image shape");
  }
  // Workers index images by label count; a short buffer would be read out of bounds.
  if (static_cast<int64_t>(data->images.size()) != data->size() * data->image_bytes()) {
    throw std::invalid_argument("DataLoader: dataset '" + data->name + "' has " +
                                std::to_string(data->images.size()) + " image bytes for " +
                                std::to_string(data->size()) + " labels");
  }
  return data;
}

Augmenter make_augmenter(const Dataset& d, const AugmentOptions& options) {
  return Augmenter(d.channels, d.height, d.width, options);
}

LoaderOptions validated(LoaderOptions o) {
  if (o.batch_size <= 0) throw std::invalid_argument("DataLoader: batch_size must be positive");
  if (o.num_workers < 0) throw std::invalid_argument("DataLoader: num_workers must be >= 0");
  if (o.prefetch <= 0) throw std::invalid_argument("DataLoader: prefetch must be positive");
  if (o.world_size <= 0 || o.rank < 0 || o.rank >= o.world_size) {
    throw std::invalid_argument("DataLoader: rank " + std::to_string(o.rank) +
                                " outside world of size " + std::to_string(o.world_size));
  }
  if (o.global_batch == 0) o.global_batch = o.batch_size * o.world_size;
  if (o.global_batch < o.world_size) {
    throw std::invalid_argument("DataLoader: a global batch of " + std::to_string(o.global_batch) +
                                " is smaller than the world (" + std::to_string(o.world_size) +
                                " ranks): every rank needs a sample in every batch");
  }
  return o;
}

// The positions of an epoch's permutation that its batches cover: whole global batches, then
// (unless drop_last) what is left in a multiple of the world size, so that every rank has a
// sample in the last batch too (a collective would otherwise wait on a rank with none). With
// global_batch = batch_size x world_size: world_size x floor(N / world_size), each rank
// floor(N / world_size) samples.
int64_t epoch_positions(int64_t samples, const LoaderOptions& o) {
  const int64_t whole = samples / o.global_batch * o.global_batch;
  if (o.drop_last) return whole;
  return whole + (samples - whole) / o.world_size * o.world_size;
}

// How many of the positions [from, to) rank r of a world of w takes: from + r, from + r + w, ...
int64_t share(int64_t from, int64_t to, int64_t r, int64_t w) {
  return to - from - r <= 0 ? 0 : (to - from - r + w - 1) / w;
}

}  // namespace

class DataLoader::Impl {
 public:
  Impl(std::shared_ptr<const Dataset> data, LoaderOptions options)
      : data_(checked(std::move(data))),
        options_(validated(std::move(options))),
        augmenter_(make_augmenter(*data_, options_.augmentation)),
        positions_(epoch_positions(data_->size(), options_)),
        batches_((positions_ + options_.global_batch - 1) / options_.global_batch),
        per_rank_(count_per_rank()) {
    workers_.reserve(static_cast<size_t>(options_.num_workers));
    try {
      for (int i = 0; i < options_.num_workers; ++i) workers_.emplace_back([this] { work(); });
    } catch (...) {
      stop_and_join();  // a joinable std::thread must not be destroyed
      throw;
    }
  }

  ~Impl() { stop_and_join(); }

  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  void start_epoch(int64_t epoch, int64_t first_batch) {
    if (epoch < 0) throw std::invalid_argument("DataLoader: negative epoch");
    if (first_batch < 0 || first_batch > batches_) {
      throw std::invalid_argument("DataLoader: first batch " + std::to_string(first_batch) +
                                  " outside [0, " + std::to_string(batches_) + "]");
    }
    auto perm = std::make_shared<const std::vector<int64_t>>(permutation(epoch));
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++generation_;  // batches of the previous epoch still being built are dropped on arrival
      started_ = true;
      epoch_ = epoch;
      perm_ = std::move(perm);
      next_claim_ = first_batch;
      next_deliver_ = first_batch;
      done_.clear();
    }
    work_cv_.notify_all();
  }

  std::optional<Batch> next() {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!started_) throw std::logic_error("DataLoader::next() called before start_epoch()");
    if (next_deliver_ >= batches_) return std::nullopt;
    if (workers_.empty()) {  // num_workers == 0: build in the caller's thread
      const int64_t b = next_deliver_++;
      auto perm = perm_;
      const int64_t epoch = epoch_;
      lock.unlock();
      return make_batch(*perm, epoch, b);
    }
    ready_cv_.wait(lock, [this] { return done_.count(next_deliver_) != 0; });
    auto node = done_.extract(next_deliver_);
    ++next_deliver_;
    lock.unlock();
    work_cv_.notify_one();  // the prefetch window moved on by one batch
    if (node.mapped().error) std::rethrow_exception(node.mapped().error);
    return std::move(node.mapped().batch);
  }

  [[nodiscard]] int64_t batches_per_epoch() const { return batches_; }
  [[nodiscard]] int64_t samples_per_epoch() const { return per_rank_; }
  [[nodiscard]] const Dataset& dataset() const { return *data_; }

 private:
  struct Slot {
    std::optional<Batch> batch;
    std::exception_ptr error;
  };

  void stop_and_join() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    work_cv_.notify_all();
    for (auto& t : workers_) t.join();
  }

  [[nodiscard]] std::vector<int64_t> permutation(int64_t epoch) const {
    std::vector<int64_t> perm(static_cast<size_t>(data_->size()));
    std::iota(perm.begin(), perm.end(), 0);
    if (options_.shuffle) {
      Rng rng(hash_combine(epoch_key(options_.seed, epoch), kPermutationTag));
      for (size_t i = perm.size(); i > 1; --i) {  // Fisher-Yates
        std::swap(perm[i - 1], perm[rng.below(i)]);
      }
    }
    return perm;
  }

  // The positions [from, to) of the epoch that batch b covers, over all ranks.
  [[nodiscard]] std::pair<int64_t, int64_t> batch_positions(int64_t b) const {
    const int64_t from = b * options_.global_batch;
    return {from, std::min(from + options_.global_batch, positions_)};
  }

  [[nodiscard]] int64_t count_per_rank() const {
    int64_t count = 0;
    for (int64_t b = 0; b < batches_; ++b) {
      const auto [from, to] = batch_positions(b);
      count += share(from, to, options_.rank, options_.world_size);
    }
    return count;
  }

  [[nodiscard]] Batch make_batch(const std::vector<int64_t>& perm, int64_t epoch, int64_t b) const {
    const Dataset& d = *data_;
    const auto [from, to] = batch_positions(b);
    const int64_t image_values = d.image_bytes();
    Batch batch;
    batch.index = b;
    batch.size = share(from, to, options_.rank, options_.world_size);
    batch.global_size = to - from;
    batch.channels = d.channels;
    batch.height = d.height;
    batch.width = d.width;
    batch.images.resize(static_cast<size_t>(batch.size * image_values));
    batch.labels.resize(static_cast<size_t>(batch.size));
    batch.samples.resize(static_cast<size_t>(batch.size));
    const uint64_t aug_key = hash_combine(epoch_key(options_.seed, epoch), kAugmentationTag);
    for (int64_t j = 0; j < batch.size; ++j) {
      // Position in the epoch's permutation: this rank takes every world_size-th one.
      const int64_t position = from + options_.rank + j * options_.world_size;
      const int64_t sample = perm[static_cast<size_t>(position)];
      const int32_t label = d.labels[static_cast<size_t>(sample)];
      if (label < 0 || label >= d.num_classes) {
        throw DataError("dataset '" + d.name + "': sample " + std::to_string(sample) +
                        " has label " + std::to_string(label) + ", outside [0, " +
                        std::to_string(d.num_classes) + ")");
      }
      const CropFlip params =
          options_.augment ? augmenter_.draw(hash_combine(aug_key, static_cast<uint64_t>(position)))
                           : CropFlip{};
      augmenter_.apply(d.image(sample), batch.images.data() + j * image_values, params);
      batch.labels[static_cast<size_t>(j)] = label;
      batch.samples[static_cast<size_t>(j)] = sample;
    }
    return batch;
  }

  void work() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      work_cv_.wait(lock, [this] {
        return stop_ || (started_ && next_claim_ < batches_ &&
                         next_claim_ < next_deliver_ + options_.prefetch);
      });
      if (stop_) return;
      const int64_t b = next_claim_++;
      const uint64_t generation = generation_;
      const int64_t epoch = epoch_;
      auto perm = perm_;
      lock.unlock();
      Slot slot;
      try {
        slot.batch = make_batch(*perm, epoch, b);
      } catch (...) {
        slot.error = std::current_exception();  // delivered by next() in this batch's place
      }
      lock.lock();
      if (generation == generation_) {
        done_.emplace(b, std::move(slot));
        if (b == next_deliver_) ready_cv_.notify_one();
      }
    }
  }

  std::shared_ptr<const Dataset> data_;
  LoaderOptions options_;
  Augmenter augmenter_;
  int64_t positions_;  // of the permutation, that the epoch's batches cover
  int64_t batches_;
  int64_t per_rank_;  // this rank's share of them

  std::mutex mutex_;
  std::condition_variable work_cv_;   // workers: a batch became claimable, or stop
  std::condition_variable ready_cv_;  // consumer: the next batch in order arrived
  bool stop_ = false;
  bool started_ = false;
  uint64_t generation_ = 0;  // bumped by start_epoch
  int64_t epoch_ = 0;
  std::shared_ptr<const std::vector<int64_t>> perm_;
  int64_t next_claim_ = 0;
  int64_t next_deliver_ = 0;
  std::map<int64_t, Slot> done_;
  std::vector<std::thread> workers_;  // last: started once everything above is initialised
};

DataLoader::DataLoader(std::shared_ptr<const Dataset> data, LoaderOptions options)
    : impl_(std::make_unique<Impl>(std::move(data), std::move(options))) {}

DataLoader::~DataLoader() = default;

void DataLoader::start_epoch(int64_t epoch, int64_t first_batch) {
  impl_->start_epoch(epoch, first_batch);
}

std::optional<Batch> DataLoader::next() { return impl_->next(); }

int64_t DataLoader::batches_per_epoch() const { return impl_->batches_per_epoch(); }
int64_t DataLoader::samples_per_epoch() const { return impl_->samples_per_epoch(); }
const Dataset& DataLoader::dataset() const { return impl_->dataset(); }

}  // namespace cifar::data
