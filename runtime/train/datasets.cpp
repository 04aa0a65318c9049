#include "train/datasets.h"

#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <array>
#include <stdexcept>
#include <string>
#include <string_view>

#include "data/download.h"
#include "data/s3_fetch.h"
#include "storage/s3_location.h"
#include "storage/s3_store.h"

namespace cifar::train {
namespace fs = std::filesystem;
namespace {

// The directory of an official archive's files: fetched from object storage into `dir` first under
// --data-uri, downloaded there first under --download.
fs::path official_files(const TrainConfig& config, const fs::path& dir) {
  if (!config.data_uri.empty()) {
    storage::S3Client client(storage::s3_options_from_environment());
    data::fetch_dataset(client, storage::parse_s3_uri(config.data_uri), config.dataset, dir);
    return dir;
  }
  if (config.download) {
    return data::download_and_extract(
        data::official_archive(config.dataset, config.download_mirror), dir);
  }
  if (!fs::exists(dir)) {
    throw data::DataError("data directory " + dir.string() +
                          " not found; pass --download to "
                          "fetch the official archive, or --data-dir to point at the files");
  }
  return dir;
}

data::TrainTest load_cifar10(const TrainConfig& config, const fs::path& dir) {
  return data::read_cifar10(official_files(config, dir));
}

data::TrainTest load_cifar100(const TrainConfig& config, const fs::path& dir) {
  // -nc 20 selects CIFAR-100's coarse labels, -nc 100 its fine ones.
  if (config.num_classes != 20 && config.num_classes != 100) {
    throw std::invalid_argument(
        "cifar100 has 100 fine or 20 coarse classes: -nc must be 100 or 20, not " +
        std::to_string(config.num_classes));
  }
  const auto labels =
      config.num_classes == 20 ? data::Cifar100Labels::kCoarse : data::Cifar100Labels::kFine;
  return data::read_cifar100(official_files(config, dir), labels);
}

data::TrainTest load_fashion_mnist(const TrainConfig& /*config*/, const fs::path& dir) {
  return data::read_fashion_mnist(dir);
}

// Written once into `dir` (as CIFAR-10 files, with -nc classes), read from there after.
data::TrainTest load_synthetic(const TrainConfig& config, const fs::path& dir) {
  if (!fs::exists(dir / "test_batch.bin")) {
    data::SyntheticOptions options;
    options.train_size = config.synthetic_train_size;
    options.test_size = config.synthetic_test_size;
    options.num_classes = config.num_classes;
    options.seed = config.seed;
    spdlog::info("writing a synthetic CIFAR-10-format dataset to {}", dir.string());
    data::write_synthetic_cifar10(dir, options);
  }
  auto sets = data::read_cifar10(dir);
  sets.train.num_classes = sets.test.num_classes = config.num_classes;
  return sets;
}

fs::path under_data(const TrainConfig& config) { return fs::path("data") / config.dataset; }

// Debian's dataset-fashion-mnist package installs the real files here.
fs::path debian_fashion_mnist(const TrainConfig& /*config*/) {
  return "/usr/share/datasets/fashion-mnist";
}

// Beside the run's checkpoints, unless they are in object storage.
fs::path under_model_dir(const TrainConfig& config) {
  if (storage::is_s3_uri(config.model_dir)) return under_data(config);
  return fs::path(config.model_dir) / "synthetic-data";
}

// A dataset: where its files are by default, and how they are read (fetched or made first where
// the configuration says so).
struct DatasetEntry {
  std::string_view name;
  fs::path (*default_dir)(const TrainConfig& config);  // without --data-dir
  data::TrainTest (*load)(const TrainConfig& config, const fs::path& dir);
};

// Ordered as dataset_names() lists them (and as error messages name them).
constexpr std::array<DatasetEntry, 4> kDatasets{{
    {"cifar10", under_data, load_cifar10},
    {"cifar100", under_data, load_cifar100},
    {"fashion-mnist", debian_fashion_mnist, load_fashion_mnist},
    {"synthetic", under_model_dir, load_synthetic},
}};

const DatasetEntry& find_dataset(const std::string& name) {
  for (const auto& entry : kDatasets) {
    if (entry.name == name) return entry;
  }
  throw std::invalid_argument(
      fmt::format("unknown dataset '{}' ({})", name, fmt::join(dataset_names(), ", ")));
}

// --train-limit / --test-limit: the first `limit` images (0 keeps all).
void keep_first(data::Dataset& set, int64_t limit) {
  if (limit <= 0 || limit >= set.size()) return;
  set.images.resize(static_cast<size_t>(limit * set.image_bytes()));
  set.labels.resize(static_cast<size_t>(limit));
}

}  // namespace

std::vector<std::string> dataset_names() {
  std::vector<std::string> names;
  names.reserve(kDatasets.size());
  for (const auto& entry : kDatasets) names.emplace_back(entry.name);
  return names;
}

fs::path default_data_dir(const TrainConfig& config) {
  const auto& dataset = find_dataset(config.dataset);
  if (!config.data_dir.empty()) return config.data_dir;
  return dataset.default_dir(config);
}

data::TrainTest load_datasets(const TrainConfig& config) {
  const auto& dataset = find_dataset(config.dataset);
  if (!config.data_uri.empty() && dataset.load != load_cifar10 && dataset.load != load_cifar100) {
    throw std::invalid_argument("--data-uri fetches CIFAR-10 or CIFAR-100 binary files, not " +
                                config.dataset);
  }
  data::TrainTest sets = dataset.load(config, default_data_dir(config));
  if (config.num_classes != sets.train.num_classes) {
    throw std::invalid_argument(config.dataset + " has " + std::to_string(sets.train.num_classes) +
                                " classes but -nc is " + std::to_string(config.num_classes));
  }
  keep_first(sets.train, config.train_limit);
  keep_first(sets.test, config.test_limit);
  spdlog::info("{}: {} training and {} test images, {}x{}x{}, {} classes", config.dataset,
               sets.train.size(), sets.test.size(), sets.train.channels, sets.train.height,
               sets.train.width, sets.train.num_classes);
  return sets;
}

}  // namespace cifar::train
