#include "train/checkpoint.h"

#include <ATen/CPUGeneratorImpl.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <torch/serialize.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <mutex>
#include <stdexcept>
#include <string>
#include <system_error>

#include "train/error_text.h"
#include "train/fence.h"

namespace cifar::train {
namespace fs = std::filesystem;
namespace {

constexpr const char* kSuffix = ".pt";

// Writes `archive` to a new file at `path`, synced to disk. Throws std::system_error with the
// system's reason (ENOSPC, EROFS, EIO...). The writer tells torch every byte was written even after
// a failed write: LibTorch's zip writer, told otherwise, throws from its destructor, which ends
// the process (the exit code 139 a full volume used to cause).
void write_synced(const fs::path& path, torch::serialize::OutputArchive& archive) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw std::system_error(errno, std::generic_category());
  int error = 0;
  try {
    archive.save_to([&](const void* data, size_t size) -> size_t {
      const auto* bytes = static_cast<const char*>(data);
      for (size_t done = 0; done < size && error == 0;) {
        const auto n = ::write(fd, bytes + done, size - done);
        if (n < 0 && errno != EINTR) error = errno;
        if (n > 0) done += static_cast<size_t>(n);
      }
      return size;
    });
  } catch (...) {
    ::close(fd);
    throw;
  }
  if (error == 0 && ::fsync(fd) != 0) error = errno;
  if (::close(fd) != 0 && error == 0) error = errno;
  if (error != 0) throw std::system_error(error, std::generic_category());
}

// fsync a file or directory so that a rename that follows is durable.
void sync_path(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
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

CheckpointManager::CheckpointManager(fs::path dir, std::string prefix, int keep)
    : dir_(std::move(dir)), prefix_(std::move(prefix)), keep_(std::max(keep, 1)) {}

fs::path CheckpointManager::save(const torch::nn::Module& model,
                                 const torch::optim::Optimizer& optimizer,
                                 const TrainState& state) const {
  return save(model, state, [&](torch::serialize::OutputArchive& archive) {
    torch::serialize::OutputArchive optimizer_archive;
    optimizer.save(optimizer_archive);
    archive.write("optimizer", optimizer_archive);
  });
}

fs::path CheckpointManager::save(const torch::nn::Module& model, const TrainState& state,
                                 const ExtraWriter& write_extra) const {
  torch::serialize::OutputArchive archive;
  write_model(archive, model);
  write_extra(archive);
  write_state(archive, state);
  archive.write("state/incarnation", scalar(fence_incarnation()));
  archive.write("rng/cpu", cpu_rng_state());

  // Zero-padded step numbers keep lexical order equal to age.
  char name[64];
  std::snprintf(name, sizeof(name), "-step-%010lld", static_cast<long long>(state.step));
  fs::path final_path = dir_ / (prefix_ + name + kSuffix);
  const fs::path temp_path = dir_ / ("." + final_path.filename().string() + ".tmp");
  try {
    fs::create_directories(dir_);
    write_synced(temp_path, archive);
    check_fence();  // a replaced chief commits nothing
    fs::rename(temp_path, final_path);
    sync_path(dir_);
  } catch (const Replaced&) {
    std::error_code ignored;
    fs::remove(temp_path, ignored);
    throw;
  } catch (const std::exception& e) {
    std::error_code ignored;
    fs::remove(temp_path, ignored);  // never a torn file; the older checkpoints stay
    throw CheckpointWriteError("checkpoint step " + std::to_string(state.step) +
                               " could not be written to " + final_path.string() + ": " +
                               error_text(e));
  }

  check_fence();  // nor deletes what its replacement may have written
  auto existing = list();
  for (size_t i = 0; i + static_cast<size_t>(keep_) < existing.size(); ++i) {
    fs::remove(existing[i]);
  }
  return final_path;
}

std::vector<fs::path> CheckpointManager::list() const {
  std::vector<fs::path> files;
  if (!fs::is_directory(dir_)) return files;
  for (const auto& entry : fs::directory_iterator(dir_)) {
    const auto name = entry.path().filename().string();
    if (entry.is_regular_file() && name.rfind(prefix_ + "-step-", 0) == 0 &&
        entry.path().extension() == kSuffix) {
      files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
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

std::optional<fs::path> CheckpointManager::newest_readable() const {
  const auto files = list();
  for (auto it = files.rbegin(); it != files.rend(); ++it) {
    try {
      (void)read_state(*it);
      return *it;
    } catch (const std::exception& e) {
      const std::string what = e.what();
      spdlog::warn("cannot read checkpoint {}, trying an older one: {}", it->string(),
                   what.substr(0, what.find('\n')));
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
  auto files = list();
  std::string newest_error;
  for (auto it = files.rbegin(); it != files.rend(); ++it) {
    try {
      torch::serialize::InputArchive archive;
      archive.load_from(it->string());
      auto state = restore(archive, model, read_extra);
      spdlog::info("resumed from {} (epoch {}, step {})", it->string(), state.epoch, state.step);
      return state;
    } catch (const std::exception& e) {
      // c10::Error's what() carries a C++ backtrace; its first line says what went wrong.
      const std::string reason = std::string(e.what()).substr(0, std::string(e.what()).find('\n'));
      spdlog::warn("cannot restore checkpoint {}, trying an older one: {}", it->string(), reason);
      if (newest_error.empty()) newest_error = reason;
    }
  }
  if (!files.empty()) {
    // None fits (another model or optimizer?): starting afresh would rotate them all away.
    throw std::runtime_error("none of the " + std::to_string(files.size()) + " checkpoints in " +
                             dir_.string() + " can be restored into this model and optimizer; " +
                             "the newest failed with: " + newest_error);
  }
  return std::nullopt;
}

void CheckpointManager::load_model(const fs::path& file, torch::nn::Module& model) {
  torch::serialize::InputArchive archive;
  archive.load_from(file.string());
  read_model(archive, model);
}

TrainState CheckpointManager::read_state(const fs::path& file) {
  torch::serialize::InputArchive archive;
  archive.load_from(file.string());
  return parse_state(archive);
}

}  // namespace cifar::train
