// Checkpoint save and load times: the same CheckpointManager writing to a directory and to an
// S3-compatible bucket (storage/store.h), side by side, for the models given. The bucket's
// endpoint and keys come from the environment (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, ...), as
// cifar-train's do; bench/checkpoint_store.sh starts a local SeaweedFS for it.
//   bench-checkpoint-store --dir DIR --uri s3://BUCKET/PREFIX [--models resnet20,alexnet] [--runs
//   10]
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "models/model.h"
#include "storage/store.h"
#include "train/checkpoint.h"
#include "train/optimizer.h"

namespace {

using Clock = std::chrono::steady_clock;

double median_ms(std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

struct Timing {
  double save_ms = 0;
  double load_ms = 0;
  size_t bytes = 0;
};

// `runs` saves (each a new step, so rotation deletes as in training) and loads of the newest.
Timing measure(const std::string& location, const std::string& model_name, int runs) {
  auto model = cifar::models::make_model(model_name, {});
  cifar::train::OptimizerOptions options;
  auto parameters = model->parameters();
  auto optimizer = cifar::train::make_optimizer(options, 0.05, parameters);
  // A step, so that the optimizer has its momentum buffers, as a checkpoint in training has.
  for (auto& p : parameters) p.mutable_grad() = torch::ones_like(p);
  optimizer->step();
  const cifar::train::CheckpointManager checkpoints(location, model_name, 3);
  std::vector<double> saves;
  std::vector<double> loads;
  Timing timing;
  for (int run = 0; run < runs; ++run) {
    cifar::train::TrainState state;
    state.step = run + 1;
    const auto start = Clock::now();
    checkpoints.save(*model, *optimizer, state);
    checkpoints.wait_until_saved();  // the write itself, which runs in the background
    saves.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    const auto load_start = Clock::now();
    const auto restored = checkpoints.load_latest(*model, *optimizer);
    loads.push_back(std::chrono::duration<double, std::milli>(Clock::now() - load_start).count());
    if (!restored || restored->step != state.step) throw std::runtime_error("restore failed");
  }
  timing.save_ms = median_ms(saves);
  timing.load_ms = median_ms(loads);
  timing.bytes = checkpoints.read(checkpoints.list().back())->size();
  return timing;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("checkpoint save and load: a directory against an S3 bucket");
  std::string dir;
  std::string uri;
  std::string models = "resnet20,alexnet";
  int runs = 10;
  app.add_option("--dir", dir, "a directory (a local volume)")->required();
  app.add_option("--uri", uri, "s3://BUCKET/PREFIX")->required();
  app.add_option("--models", models, "comma-separated");
  app.add_option("--runs", runs, "saves and loads of each, the median reported");
  CLI11_PARSE(app, argc, argv);
  torch::set_num_threads(1);
  spdlog::set_level(spdlog::level::warn);  // not a "resumed from" line for every load

  std::printf(
      "| model | checkpoint | volume save | S3 save | S3 / volume | volume load | S3 load |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|\n");
  std::stringstream names(models);
  for (std::string model; std::getline(names, model, ',');) {
    const auto volume = measure(dir + "/" + model, model, runs);
    const auto bucket = measure(uri + "/" + model, model, runs);
    std::printf("| %s | %.1f MB | %.1f ms | %.1f ms | %.2fx | %.1f ms | %.1f ms |\n", model.c_str(),
                static_cast<double>(volume.bytes) / 1e6, volume.save_ms, bucket.save_ms,
                bucket.save_ms / volume.save_ms, volume.load_ms, bucket.load_ms);
  }
  return 0;
}
