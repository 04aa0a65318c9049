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

#include "storage/store.h"
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
                                     int keep)
    : store_(std::move(store)),
      prefix_(std::move(prefix)),
      keep_(std::max(keep, 1)),
      known_(std::make_shared<Known>()) {}

CheckpointManager::CheckpointManager(const std::string& location, std::string prefix, int keep)
    : CheckpointManager(storage::open_store(location), std::move(prefix), keep) {}

struct CheckpointManager::Known {
  std::mutex mu;
  bool listed = false;
  std::vector<std::string> names;  // in key order, which is step order
};

std::string CheckpointManager::save(const torch::nn::Module& model,
                                    const torch::optim::Optimizer& optimizer,
                                    const TrainState& state) const {
  return save(model, state, [&](torch::serialize::OutputArchive& archive) {
    torch::serialize::OutputArchive optimizer_archive;
    optimizer.save(optimizer_archive);
    archive.write("optimizer", optimizer_archive);
  });
}

std::string CheckpointManager::save(const torch::nn::Module& model, const TrainState& state,
                                    const ExtraWriter& write_extra) const {
  torch::serialize::OutputArchive archive;
  write_model(archive, model);
  write_extra(archive);
  write_state(archive, state);
  archive.write("state/incarnation", scalar(fence_incarnation()));
  archive.write("rng/cpu", cpu_rng_state());

  // Zero-padded step numbers keep lexical order equal to age.
  char number[64];
  std::snprintf(number, sizeof(number), "-step-%010lld", static_cast<long long>(state.step));
  const std::string name = prefix_ + number + kSuffix;
  const auto bytes = bytes_of(archive);
  check_fence();  // a replaced chief commits nothing
  try {
    store_->put(name, bytes);
  } catch (const std::exception& e) {  // never a torn object; the older checkpoints stay
    // The system's reason alone (ENOSPC, EROFS...): the message names the place already.
    const auto* system = dynamic_cast<const std::system_error*>(&e);
    throw CheckpointWriteError("checkpoint step " + std::to_string(state.step) +
                               " could not be written to " + store_->location_of(name) + ": " +
                               (system != nullptr ? system->code().message() : error_text(e)));
  }

  std::vector<std::string> pruned;
  {
    const std::lock_guard guard(known_->mu);
    auto& names = known_->names;
    if (!known_->listed) {
      names = list();
      known_->listed = true;
    }
    if (const auto at = std::lower_bound(names.begin(), names.end(), name);
        at == names.end() || *at != name) {
      names.insert(at, name);
    }
    const auto excess = names.size() > static_cast<size_t>(keep_)
                            ? names.size() - static_cast<size_t>(keep_)
                            : size_t{0};
    pruned.assign(names.begin(), names.begin() + static_cast<std::ptrdiff_t>(excess));
    names.erase(names.begin(), names.begin() + static_cast<std::ptrdiff_t>(excess));
  }
  if (!pruned.empty()) {
    check_fence();  // nor deletes what its replacement may have written
    for (const auto& old : pruned) store_->remove(old);
  }
  return store_->location_of(name);
}

std::vector<std::string> CheckpointManager::list() const {
  auto names = store_->list(prefix_ + "-step-");
  names.erase(std::remove_if(names.begin(), names.end(),
                             [](const std::string& name) {
                               return name.size() < std::strlen(kSuffix) ||
                                      name.compare(name.size() - std::strlen(kSuffix),
                                                   std::string::npos, kSuffix) != 0;
                             }),
              names.end());
  return names;
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

std::optional<std::pair<std::string, std::string>> CheckpointManager::newest_readable() const {
  const auto names = list();
  for (auto it = names.rbegin(); it != names.rend(); ++it) {
    try {
      auto bytes = read(*it);
      if (!bytes) continue;  // rotated away meanwhile
      (void)state_from_bytes(*bytes);
      return std::make_pair(*it, std::move(*bytes));
    } catch (const std::exception& e) {
      spdlog::warn("cannot read checkpoint {}, trying an older one: {}", location_of(*it),
                   error_text(e));
    }
  }
  return std::nullopt;
}

TrainState CheckpointManager::load_bytes(const std::string& bytes, torch::nn::Module& model,
                                         torch::optim::Optimizer& optimizer) {
  torch::serialize::InputArchive archive;
  archive.load_from(bytes.data(), bytes.size());
  return restore(archive, model, optimizer_reader(optimizer));
}

std::optional<TrainState> CheckpointManager::load_latest(torch::nn::Module& model,
                                                         const ExtraReader& read_extra) const {
  const auto names = list();
  std::string newest_error;
  for (auto it = names.rbegin(); it != names.rend(); ++it) {
    try {
      const auto bytes = read(*it);
      if (!bytes) continue;  // rotated away meanwhile
      torch::serialize::InputArchive archive;
      archive.load_from(bytes->data(), bytes->size());
      auto state = restore(archive, model, read_extra);
      spdlog::info("resumed from {} (epoch {}, step {})", location_of(*it), state.epoch,
                   state.step);
      return state;
    } catch (const std::exception& e) {
      spdlog::warn("cannot restore checkpoint {}, trying an older one: {}", location_of(*it),
                   error_text(e));
      if (newest_error.empty()) newest_error = error_text(e);
    }
  }
  if (!names.empty()) {
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
