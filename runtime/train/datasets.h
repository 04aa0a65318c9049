// Picks, fetches and checks the dataset a TrainConfig names.
#pragma once

#include <filesystem>

#include "data/dataset.h"
#include "train/config.h"

namespace cifar::train {

// Where a dataset is looked for when --data-dir is not given.
std::filesystem::path default_data_dir(const TrainConfig& config);

// Loads (downloading or generating first where configured) the train and test sets, applies
// --train-limit, and checks that --num-classes fits the dataset. Throws data::DataError for bad
// data and std::invalid_argument for a configuration the data cannot satisfy.
data::TrainTest load_datasets(const TrainConfig& config);

}  // namespace cifar::train
