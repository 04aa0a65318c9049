// The datasets a run can train on, by name: one registry (datasets.cpp) that the command line's
// -d check and loading both read.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "config/train_config.h"
#include "data/dataset.h"

namespace cifar::train {

// The registry's names, in its order (the CLI's choices and error messages list them so).
std::vector<std::string> dataset_names();

// Where config.dataset is looked for: --data-dir, else the dataset's default. Throws
// std::invalid_argument for a dataset the registry does not have.
std::filesystem::path default_data_dir(const TrainConfig& config);

// Loads (downloading or generating first where configured) the train and test sets, applies
// --train-limit, and checks that --num-classes fits the dataset. Throws data::DataError for bad
// data and std::invalid_argument for a configuration the data cannot satisfy.
data::TrainTest load_datasets(const TrainConfig& config);

}  // namespace cifar::train
