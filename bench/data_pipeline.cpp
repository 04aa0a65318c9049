// bench-data-pipeline: throughput of the threaded loader (random crop, flip, normalise) on
// CIFAR-format data, and the single-thread CPU time per batch. bench/data_pipeline.sh runs it
// beside torchvision's DataLoader on the same files.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "data/dataset.h"
#include "data/loader.h"

namespace {

namespace fs = std::filesystem;
using cifar::data::DataLoader;
using cifar::data::LoaderOptions;

struct Args {
  std::string data;             // CIFAR-10 binary dir; empty: synthetic in a temporary dir
  std::string write_synthetic;  // only write synthetic data there and exit
  int workers = 2;
  int64_t batch = 128;
  int epochs = 2;
  int prefetch = 4;
  int cpu_batches = 100;
};

[[noreturn]] void usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s [--data DIR] [--workers N] [--batch N] [--epochs N] [--prefetch N]\n"
               "          [--cpu-batches N] | --write-synthetic DIR\n"
               "Without --data, writes 50000 + 10000 synthetic images to a temporary dir.\n",
               argv0);
  std::exit(2);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) usage(argv[0]);
    const char* value = argv[++i];
    if (flag == "--data") {
      a.data = value;
    } else if (flag == "--write-synthetic") {
      a.write_synthetic = value;
    } else if (flag == "--workers") {
      a.workers = std::atoi(value);
    } else if (flag == "--batch") {
      a.batch = std::atoll(value);
    } else if (flag == "--epochs") {
      a.epochs = std::atoi(value);
    } else if (flag == "--prefetch") {
      a.prefetch = std::atoi(value);
    } else if (flag == "--cpu-batches") {
      a.cpu_batches = std::atoi(value);
    } else {
      usage(argv[0]);
    }
  }
  return a;
}

// Removes the synthetic data however main() ends.
struct TempDir {
  explicit TempDir(fs::path p) : path(std::move(p)) {}
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  fs::path path;
};

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// The same work as the torchvision side: RandomCrop(32, 4), RandomHorizontalFlip, Normalize
// with the usual CIFAR-10 constants.
LoaderOptions options(const Args& a, int workers) {
  LoaderOptions o;
  o.batch_size = a.batch;
  o.shuffle = true;
  o.augment = true;
  o.num_workers = workers;
  o.prefetch = a.prefetch;
  o.augmentation.normalize = {{0.4914F, 0.4822F, 0.4465F}, {0.2470F, 0.2435F, 0.2616F}};
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  try {
    cifar::data::SyntheticOptions synth;
    synth.train_size = 50000;
    synth.test_size = 10000;
    if (!args.write_synthetic.empty()) {
      cifar::data::write_synthetic_cifar10(args.write_synthetic, synth);
      return 0;
    }
    fs::path dir = args.data;
    std::optional<TempDir> temp;
    if (dir.empty()) {
      temp.emplace(fs::temp_directory_path() / ("bench-data-" + std::to_string(::getpid())));
      dir = temp->path;
      cifar::data::write_synthetic_cifar10(dir, synth);
    }
    auto data = std::make_shared<const cifar::data::Dataset>(cifar::data::read_cifar10(dir).train);

    // Throughput: whole epochs as a training loop sees them, worker start-up included.
    DataLoader loader(data, options(args, args.workers));
    double best = 0;
    int64_t checksum = 0;
    for (int e = 0; e < args.epochs; ++e) {
      const auto t0 = std::chrono::steady_clock::now();
      loader.start_epoch(e);
      int64_t images = 0;
      while (auto batch = loader.next()) {
        images += batch->size;
        checksum += batch->labels[0];
      }
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const double rate = static_cast<double>(images) / s;
      std::printf("epoch %d: %lld images in %.3f s = %.0f images/s\n", e,
                  static_cast<long long>(images), s, rate);
      best = std::max(best, rate);
    }

    // Single-thread CPU cost: num_workers = 0 builds each batch in this thread.
    DataLoader inline_loader(data, options(args, 0));
    inline_loader.start_epoch(0);
    const double c0 = thread_cpu_seconds();
    int batches = 0;
    for (; batches < args.cpu_batches; ++batches) {
      auto batch = inline_loader.next();
      if (!batch) break;
      checksum += batch->labels[0];
    }
    const double cpu_ms = (thread_cpu_seconds() - c0) * 1e3 / std::max(batches, 1);

    std::printf("images: %lld  workers: %d  batch: %lld  (checksum %lld)\n",
                static_cast<long long>(data->size()), args.workers,
                static_cast<long long>(args.batch), static_cast<long long>(checksum));
    std::printf("images_per_s: %.0f\n", best);
    std::printf("cpu_ms_per_batch: %.3f\n", cpu_ms);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench-data-pipeline: %s\n", e.what());
    return 1;
  }
  return 0;
}
