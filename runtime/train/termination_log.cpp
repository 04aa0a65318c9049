#include "train/termination_log.h"

#include <spdlog/spdlog.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "contract/termination.h"

namespace cifar::train {
namespace {

using nlohmann::json;
namespace key = contract::termination;

void write(const std::string& path, const json& summary) {
  if (path.empty()) return;
  auto text = summary.dump();
  if (text.size() > key::kMaxBytes) {  // only an error message can be this long: keep its start
    text = json{{key::kError, summary.value(std::string(key::kError), "").substr(0, 3000)}}.dump();
  }
  std::ofstream out(path, std::ios::trunc);
  out << text;
  if (!out.flush()) spdlog::warn("could not write the termination log {}", path);
}

}  // namespace

void write_termination_log(const std::string& path, const TrainResult& result) {
  json summary = {{key::kEpoch, result.last_epoch.epoch},
                  {key::kStep, result.steps},
                  {key::kLoss, result.last_epoch.train_loss},
                  {key::kTrainAccuracy, result.last_epoch.train_accuracy}};
  if (result.evaluated) summary[std::string(key::kTestAccuracy)] = result.last_epoch.test_accuracy;
  write(path, summary);
}

void write_termination_log(const std::string& path, const EvaluatorResult& result) {
  json summary = json::object();
  if (result.evaluated > 0) {
    summary = {{key::kStep, result.last_step}, {key::kTestAccuracy, result.last_accuracy}};
  }
  write(path, summary);
}

void write_termination_error(const std::string& path, const std::string& error) {
  write(path, {{key::kError, error}});
}

}  // namespace cifar::train
