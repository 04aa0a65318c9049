#include "train/checkpoint.h"

#include <ATen/CPUGeneratorImpl.h>
#include <spdlog/spdlog.h>
#include <torch/serialize.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <system_error>

#include "storage/s3_client.h"
#include "storage/store.h"
#include "train/background_writer.h"
#include "train/error_text.h"
#include "train/fence.h"

namespace cifar::train {
namespace fs = std::filesystem;
namespace {

constexpr const char* kSuffix = ".pt";

// The archive's bytes. The writer takes every byte: LibTorch's zip writer, told otherwise, throws
// from its destructor, which ends the process.
std::string bytes_of(torch::serialize::OutputArchive& archive) {
  std::string bytes;
  archive.save_to([&](const void* data, size_t size) -> size_t {
    bytes.append(static_cast<const char*>(data), size);
    return size;
  });
  return bytes;
}

// The run's checkpoints in the store, oldest first.
std::vector<std::string> checkpoint_names(const storage::Store& store, const std::string& prefix) {
  auto names = store.list(prefix + "-step-");
  names.erase(std::remove_if(names.begin(), names.end(),
                             [](const std::string& name) {
                               return name.size() < std::strlen(kSuffix) ||
                                      name.compare(name.size() - std::strlen(kSuffix),
                                                   std::string::npos, kSuffix) != 0;
                             }),
              names.end());
  return names;
}

torch::Tensor scalar(int64_t v) { return torch::tensor(v, torch::kInt64); }
torch::Tensor scalar(double v) { return torch::tensor(v, torch::kFloat64); }

int64_t read_int(torch::serialize::InputArchive& ar, const char* key) {
  torch::Tensor t;
  ar.read(key, t);
  return t.item<int64_t>();
}
double read_double(torch::serialize::InputArchive& ar, const char* key) {
  torch::Tensor t;
  ar.read(key, t);
  return t.item<double>();
}

void write_state(torch::serialize::OutputArchive& ar, const TrainState& s) {
  ar.write("state/epoch", scalar(s.epoch));
  ar.write("state/step", scalar(s.step));
  ar.write("state/batch_in_epoch", scalar(s.batch_in_epoch));
  ar.write("state/epoch_loss_sum", scalar(s.epoch_loss_sum));
  ar.write("state/epoch_correct", scalar(s.epoch_correct));
  ar.write("state/epoch_seen", scalar(s.epoch_seen));
  ar.write("state/epoch_seconds", scalar(s.epoch_seconds));
  ar.write("state/best_test_accuracy", scalar(s.best_test_accuracy));
  if (const auto& t = s.epoch_samples) {
    ar.write("state/epoch_samples",
             torch::tensor({t->count, t->index_sum, t->index_square_sum}, torch::kInt64));
  }
}

TrainState parse_state(torch::serialize::InputArchive& ar) {
  TrainState s;
  s.epoch = read_int(ar, "state/epoch");
  s.step = read_int(ar, "state/step");
  s.batch_in_epoch = read_int(ar, "state/batch_in_epoch");
  s.epoch_loss_sum = read_double(ar, "state/epoch_loss_sum");
  s.epoch_correct = read_int(ar, "state/epoch_correct");
  s.epoch_seen = read_int(ar, "state/epoch_seen");
  s.epoch_seconds = read_double(ar, "state/epoch_seconds");
  s.best_test_accuracy = read_double(ar, "state/best_test_accuracy");
  if (torch::Tensor t; ar.try_read("state/incarnation", t)) s.written_by = t.item<int64_t>();
  if (torch::Tensor t; ar.try_read("state/epoch_samples", t) && t.numel() == 3) {
    s.epoch_samples = SampleTally{t[0].item<int64_t>(), t[1].item<int64_t>(), t[2].item<int64_t>()};
  }
  return s;
}

// Parameters and buffers by their full dotted names. torch::nn::Module::load would do, but it
// set_()s each tensor to what the file holds, silently reshaping a model to a foreign checkpoint.
void write_model(torch::serialize::OutputArchive& ar, const torch::nn::Module& model) {
  for (const auto& p : model.named_parameters()) ar.write("model/param/" + p.key(), p.value());
  for (const auto& b : model.named_buffers()) {
    ar.write("model/buffer/" + b.key(), b.value(), /*is_buffer=*/true);
  }
}

std::string shape_of(const torch::Tensor& t) {
  std::string out = "[";
  for (const auto d : t.sizes()) out += (out.size() > 1 ? ", " : "") + std::to_string(d);
  return out + "] " + std::string(c10::toString(t.scalar_type()));
}

void read_model(torch::serialize::InputArchive& ar, torch::nn::Module& model) {
  torch::NoGradGuard no_grad;
  auto restore = [&](const std::string& key, torch::Tensor& target) {
    torch::Tensor saved;
    ar.read(key, saved);
    if (!saved.sizes().equals(target.sizes()) || saved.scalar_type() != target.scalar_type()) {
      throw std::runtime_error(key + " is " + shape_of(saved) + " in the checkpoint but " +
                               shape_of(target) + " in the model");
    }
    target.copy_(saved);
  };
  for (auto& p : model.named_parameters()) restore("model/param/" + p.key(), p.value());
  for (auto& b : model.named_buffers()) restore("model/buffer/" + b.key(), b.value());
}

// Dropout and other random ops draw from the default CPU generator: its state makes resume exact.
torch::Tensor cpu_rng_state() {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}
void set_cpu_rng_state(const torch::Tensor& state) {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

}  // namespace

CheckpointManager::CheckpointManager(std::shared_ptr<storage::Store> store, std::string prefix,
                                     int keep, Fence fence)
    : store_(std::move(store)),
      fence_(std::move(fence)),
      prefix_(std::move(prefix)),
      keep_(std::max(keep, 1)),
      known_(std::make_shared<Known>()),
      writer_(std::make_shared<Writer>()) {}

CheckpointManager::CheckpointManager(const std::string& location, std::string prefix, int keep)
    : CheckpointManager(storage::open_store(location), std::move(prefix), keep) {}

struct CheckpointManager::Known {
  std::mutex mu;
  bool listed = false;
  std::vector<std::string> names;     // in key order, which is step order
  std::optional<int64_t> saved_step;  // of the newest checkpoint this process wrote
};

struct CheckpointManager::Writer {
  std::mutex mu;
  // Made at the first save (a manager that only reads starts no thread); under `mu`.
  std::unique_ptr<BackgroundWriter> uploader;

  BackgroundWriter* get() {
    const std::lock_guard guard(mu);
    return uploader.get();
  }
};

namespace {

CheckpointManager::ExtraWriter optimizer_writer(const torch::optim::Optimizer& optimizer) {
  return [&optimizer](torch::serialize::OutputArchive& archive) {
    torch::serialize::OutputArchive optimizer_archive;
    optimizer.save(optimizer_archive);
    archive.write("optimizer", optimizer_archive);
  };
}

std::string checkpoint_bytes(const torch::nn::Module& model, const TrainState& state,
                             const CheckpointManager::ExtraWriter& write_extra,
                             int64_t incarnation) {
  torch::serialize::OutputArchive archive;
  write_model(archive, model);
  write_extra(archive);
  write_state(archive, state);
  archive.write("state/incarnation", scalar(incarnation));
  archive.write("rng/cpu", cpu_rng_state());
  return bytes_of(archive);
}

}  // namespace

std::string CheckpointManager::to_bytes(const torch::nn::Module& model,
                                        const torch::optim::Optimizer& optimizer,
                                        const TrainState& state) const {
  return checkpoint_bytes(model, state, optimizer_writer(optimizer), fence_.incarnation());
}

std::string CheckpointManager::save(const torch::nn::Module& model,
                                    const torch::optim::Optimizer& optimizer,
                                    const TrainState& state) const {
  return save(model, state, optimizer_writer(optimizer));
}

std::string CheckpointManager::save(const torch::nn::Module& model, const TrainState& state,
                                    const ExtraWriter& write_extra) const {
  auto bytes = checkpoint_bytes(model, state, write_extra, fence_.incarnation());

  // Zero-padded step numbers keep lexical order equal to age.
  char number[64];
  std::snprintf(number, sizeof(number), "-step-%010lld", static_cast<long long>(state.step));
  const std::string name = prefix_ + number + kSuffix;
  BackgroundWriter* uploader = nullptr;
  {
    const std::lock_guard guard(writer_->mu);
    if (!writer_->uploader) {
      // The writer's thread may outlive this manager (a write it cannot abandon): it holds the
      // store and the bookkeeping itself.
      writer_->uploader = std::make_unique<BackgroundWriter>(
          [store = store_, fence = fence_, known = known_, prefix = prefix_,
           keep = keep_](const PendingWrite& checkpoint) {
            commit(store, fence, *known, prefix, keep, checkpoint);
          });
    }
    uploader = writer_->uploader.get();
  }
  uploader->submit({name, std::move(bytes), state.step});
  return store_->location_of(name);
}

void CheckpointManager::commit(const std::shared_ptr<storage::Store>& store, const Fence& fence,
                               Known& known, const std::string& prefix, int keep,
                               const PendingWrite& checkpoint) {
  const auto& name = checkpoint.name;
  // A store that refused, or stayed away too long, whichever request met it (the fence's read, the
  // PUT): the error says which step waited (the training loop adds the newest one saved).
  const auto not_saved = [&](const storage::S3Error& e) {
    return e.retold("checkpoint step " + std::to_string(checkpoint.step) +
                    " not saved: " + e.what());
  };
  try {
    fence.check();  // a replaced chief commits nothing
  } catch (const storage::S3Error& e) {
    throw not_saved(e);
  }
  try {
    store->put(name, checkpoint.bytes);
  } catch (const storage::S3Error& e) {
    throw not_saved(e);
  } catch (const std::exception& e) {  // never a torn object; the older checkpoints stay
    // The system's reason alone (ENOSPC, EROFS...): the message names the place already.
    const auto* system = dynamic_cast<const std::system_error*>(&e);
    throw CheckpointWriteError("checkpoint step " + std::to_string(checkpoint.step) +
                               " could not be written to " + store->location_of(name) + ": " +
                               (system != nullptr ? system->code().message() : error_text(e)));
  }

  std::vector<std::string> pruned;
  {
    const std::lock_guard guard(known.mu);
    known.saved_step = checkpoint.step;
    auto& names = known.names;
    if (!known.listed) {
      names = checkpoint_names(*store, prefix);
      known.listed = true;
    }
    if (const auto at = std::lower_bound(names.begin(), names.end(), name);
        at == names.end() || *at != name) {
      names.insert(at, name);
    }
    const auto excess = names.size() > static_cast<size_t>(keep)
                            ? names.size() - static_cast<size_t>(keep)
                            : size_t{0};
    pruned.assign(names.begin(), names.begin() + static_cast<std::ptrdiff_t>(excess));
    names.erase(names.begin(), names.begin() + static_cast<std::ptrdiff_t>(excess));
  }
  if (!pruned.empty()) {
    fence.check();  // nor deletes what its replacement may have written
    for (const auto& old : pruned) store->remove(old);
  }
}

void CheckpointManager::wait_until_saved() const {
  if (auto* uploader = writer_->get()) uploader->wait_until_saved();
}

std::optional<int64_t> CheckpointManager::saved_step() const {
  const std::lock_guard guard(known_->mu);
  return known_->saved_step;
}

bool CheckpointManager::wait_until_saved(std::chrono::milliseconds at_most) const {
  auto* uploader = writer_->get();
  return uploader == nullptr || uploader->wait_until_saved(at_most);
}

void CheckpointManager::raise_if_failed() const {
  if (auto* uploader = writer_->get()) uploader->raise_if_failed();
}

std::vector<std::string> CheckpointManager::list() const {
  return checkpoint_names(*store_, prefix_);
}

std::optional<std::string> CheckpointManager::read(const std::string& name) const {
  return store_->get(name);
}

TrainState CheckpointManager::state_of(const std::string& name) const {
  const auto bytes = read(name);
  if (!bytes) throw std::runtime_error(location_of(name) + " is gone");
  return state_from_bytes(*bytes);
}

std::string CheckpointManager::location_of(const std::string& name) const {
  return store_->location_of(name);
}

namespace {

CheckpointManager::ExtraReader optimizer_reader(torch::optim::Optimizer& optimizer) {
  return [&optimizer](torch::serialize::InputArchive& archive) {
    torch::serialize::InputArchive optimizer_archive;
    archive.read("optimizer", optimizer_archive);
    optimizer.load(optimizer_archive);
  };
}

// Everything a checkpoint restores: the model, what the caller keeps in it, the RNG, the state.
TrainState restore(torch::serialize::InputArchive& archive, torch::nn::Module& model,
                   const CheckpointManager::ExtraReader& read_extra) {
  read_model(archive, model);
  read_extra(archive);
  torch::Tensor rng;
  archive.read("rng/cpu", rng);
  set_cpu_rng_state(rng);
  return parse_state(archive);
}

}  // namespace

std::optional<TrainState> CheckpointManager::load_latest(torch::nn::Module& model,
                                                         torch::optim::Optimizer& optimizer) const {
  return load_latest(model, optimizer_reader(optimizer));
}

std::optional<std::string> CheckpointManager::restore_newest(const Restorer& restore,
                                                             std::string* newest_error) const {
  const auto names = list();
  for (auto it = names.rbegin(); it != names.rend(); ++it) {
    try {
      const auto bytes = read(*it);
      if (!bytes) continue;  // rotated away meanwhile
      restore(*it, *bytes);
      return *it;
    } catch (const storage::S3Error&) {  // the store, not the checkpoint: no older one is better
      throw;
    } catch (const std::exception& e) {
      spdlog::warn("cannot restore checkpoint {}, trying an older one: {}", location_of(*it),
                   error_text(e));
      if (newest_error != nullptr && newest_error->empty()) *newest_error = error_text(e);
    }
  }
  return std::nullopt;
}

std::optional<std::pair<std::string, std::string>> CheckpointManager::newest_readable() const {
  std::string newest;
  const auto name = restore_newest([&](const std::string&, const std::string& bytes) {
    static_cast<void>(state_from_bytes(bytes));
    newest = bytes;
  });
  if (!name) return std::nullopt;
  return std::make_pair(*name, std::move(newest));
}

TrainState CheckpointManager::load_bytes(const std::string& bytes, torch::nn::Module& model,
                                         torch::optim::Optimizer& optimizer) {
  torch::serialize::InputArchive archive;
  archive.load_from(bytes.data(), bytes.size());
  return restore(archive, model, optimizer_reader(optimizer));
}

std::optional<TrainState> CheckpointManager::load_latest(torch::nn::Module& model,
                                                         const ExtraReader& read_extra) const {
  std::optional<TrainState> state;
  std::string newest_error;
  const auto name = restore_newest(
      [&](const std::string&, const std::string& bytes) {
        torch::serialize::InputArchive archive;
        archive.load_from(bytes.data(), bytes.size());
        state = restore(archive, model, read_extra);
      },
      &newest_error);
  if (name) {
    spdlog::info("resumed from {} (epoch {}, step {})", location_of(*name), state->epoch,
                 state->step);
    return state;
  }
  if (const auto names = list(); !names.empty()) {
    // None fits (another model or optimizer?): starting afresh would rotate them all away.
    throw std::runtime_error("none of the " + std::to_string(names.size()) + " checkpoints in " +
                             store_->location() +
                             " can be restored into this model and optimizer; " +
                             "the newest failed with: " + newest_error);
  }
  return std::nullopt;
}

void CheckpointManager::model_from_bytes(const std::string& bytes, torch::nn::Module& model) {
  torch::serialize::InputArchive archive;
  archive.load_from(bytes.data(), bytes.size());
  read_model(archive, model);
}

TrainState CheckpointManager::state_from_bytes(const std::string& bytes) {
  torch::serialize::InputArchive archive;
  archive.load_from(bytes.data(), bytes.size());
  return parse_state(archive);
}

void CheckpointManager::load_model_file(const fs::path& file, torch::nn::Module& model) {
  torch::serialize::InputArchive archive;
  archive.load_from(file.string());
  read_model(archive, model);
}

}  // namespace cifar::train
