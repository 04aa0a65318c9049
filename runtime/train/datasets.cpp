#include "train/datasets.h"

#include <spdlog/spdlog.h>

#include <stdexcept>
#include <string>

#include "data/download.h"

namespace cifar::train {
namespace fs = std::filesystem;

fs::path default_data_dir(const TrainConfig& config) {
  if (!config.data_dir.empty()) return config.data_dir;
  // Debian's dataset-fashion-mnist package installs the real files here.
  if (config.dataset == "fashion-mnist") return "/usr/share/datasets/fashion-mnist";
  if (config.dataset == "synthetic") return fs::path(config.model_dir) / "synthetic-data";
  return fs::path("data") / config.dataset;
}

namespace {

// --train-limit / --test-limit: the first `limit` images (0 keeps all).
void keep_first(data::Dataset& set, int64_t limit) {
  if (limit <= 0 || limit >= set.size()) return;
  set.images.resize(static_cast<size_t>(limit * set.image_bytes()));
  set.labels.resize(static_cast<size_t>(limit));
}

}  // namespace

data::TrainTest load_datasets(const TrainConfig& config) {
  const fs::path dir = default_data_dir(config);
  data::TrainTest sets;
  if (config.dataset == "cifar10" || config.dataset == "cifar100") {
    // -nc 20 selects CIFAR-100's coarse labels, -nc 100 its fine ones.
    if (config.dataset == "cifar100" && config.num_classes != 20 && config.num_classes != 100) {
      throw std::invalid_argument(
          "cifar100 has 100 fine or 20 coarse classes: -nc must be 100 "
          "or 20, not " +
          std::to_string(config.num_classes));
    }
    fs::path root = dir;
    if (config.download) {
      root = data::download_and_extract(
          data::official_archive(config.dataset, config.download_mirror), dir);
    }
    if (!config.download && !fs::exists(root)) {
      throw data::DataError("data directory " + root.string() +
                            " not found; pass --download to "
                            "fetch the official archive, or --data-dir to point at the files");
    }
    if (config.dataset == "cifar10") {
      sets = data::read_cifar10(root);
    } else {
      sets = data::read_cifar100(root, config.num_classes == 20 ? data::Cifar100Labels::kCoarse
                                                                : data::Cifar100Labels::kFine);
    }
  } else if (config.dataset == "fashion-mnist") {
    sets = data::read_fashion_mnist(dir);
  } else if (config.dataset == "synthetic") {
    if (!fs::exists(dir / "test_batch.bin")) {
      data::SyntheticOptions options;
      options.train_size = config.synthetic_train_size;
      options.test_size = config.synthetic_test_size;
      options.num_classes = config.num_classes;
      options.seed = config.seed;
      spdlog::info("writing a synthetic CIFAR-10-format dataset to {}", dir.string());
      data::write_synthetic_cifar10(dir, options);
    }
    sets = data::read_cifar10(dir);
    sets.train.num_classes = sets.test.num_classes = config.num_classes;
  } else {
    throw std::invalid_argument("unknown dataset '" + config.dataset +
                                "' (cifar10, cifar100, fashion-mnist, synthetic)");
  }

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
