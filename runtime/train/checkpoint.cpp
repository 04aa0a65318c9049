#include "train/checkpoint.h"

#include <ATen/CPUGeneratorImpl.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <torch/serialize.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <mutex>

namespace cifar::train {
namespace fs = std::filesystem;
namespace {

constexpr const char* kSuffix = ".pt";

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
  return s;
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
  fs::create_directories(dir_);
  torch::serialize::OutputArchive archive;
  torch::serialize::OutputArchive model_archive;
  model.save(model_archive);
  archive.write("model", model_archive);
  torch::serialize::OutputArchive optimizer_archive;
  optimizer.save(optimizer_archive);
  archive.write("optimizer", optimizer_archive);
  write_state(archive, state);
  archive.write("rng/cpu", cpu_rng_state());

  // Zero-padded step numbers keep lexical order equal to age.
  char name[64];
  std::snprintf(name, sizeof(name), "-step-%010lld", static_cast<long long>(state.step));
  const fs::path final_path = dir_ / (prefix_ + name + kSuffix);
  const fs::path temp_path = dir_ / ("." + final_path.filename().string() + ".tmp");
  archive.save_to(temp_path.string());
  sync_path(temp_path);
  fs::rename(temp_path, final_path);
  sync_path(dir_);

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

std::optional<TrainState> CheckpointManager::load_latest(torch::nn::Module& model,
                                                         torch::optim::Optimizer& optimizer) const {
  auto files = list();
  for (auto it = files.rbegin(); it != files.rend(); ++it) {
    try {
      torch::serialize::InputArchive archive;
      archive.load_from(it->string());
      torch::serialize::InputArchive model_archive;
      archive.read("model", model_archive);
      model.load(model_archive);
      torch::serialize::InputArchive optimizer_archive;
      archive.read("optimizer", optimizer_archive);
      optimizer.load(optimizer_archive);
      torch::Tensor rng;
      archive.read("rng/cpu", rng);
      set_cpu_rng_state(rng);
      auto state = parse_state(archive);
      spdlog::info("resumed from {} (epoch {}, step {})", it->string(), state.epoch, state.step);
      return state;
    } catch (const c10::Error& e) {
      spdlog::warn("checkpoint {} is unreadable, trying an older one: {}", it->string(),
                   e.what_without_backtrace());
    }
  }
  return std::nullopt;
}

void CheckpointManager::load_model(const fs::path& file, torch::nn::Module& model) {
  torch::serialize::InputArchive archive;
  archive.load_from(file.string());
  torch::serialize::InputArchive model_archive;
  archive.read("model", model_archive);
  model.load(model_archive);
}

TrainState CheckpointManager::read_state(const fs::path& file) {
  torch::serialize::InputArchive archive;
  archive.load_from(file.string());
  return parse_state(archive);
}

}  // namespace cifar::train
