#include "train/termination_log.h"

#include <spdlog/spdlog.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "contract/termination.h"

namespace cifar::train {
namespace {

using nlohmann::json;
namespace key = contract::termination;

// Never throws: it runs on the way out, in main's error handlers too.
void write(const std::string& path, const json& summary) {
  if (path.empty()) return;
  try {
    // An error message may hold any bytes: invalid UTF-8 is replaced, not thrown on.
    const auto dump = [](const json& j) {
      return j.dump(-1, ' ', false, json::error_handler_t::replace);
    };
    auto text = dump(summary);
    if (text.size() > key::kMaxBytes) {  // only an error message can be this long: keep its start
      text = dump(json{{key::kError, summary.value(std::string(key::kError), "").substr(0, 3000)}});
    }
    std::ofstream out(path, std::ios::trunc);
    out << text;
    if (!out.flush()) spdlog::warn("could not write the termination log {}", path);
  } catch (const std::exception& e) {
    spdlog::warn("could not write the termination log {}: {}", path, e.what());
  }
}

}  // namespace

void write_termination_log(const std::string& path, const TrainResult& result) {
  json summary = {{key::kEpoch, result.last_epoch.epoch},
                  {key::kStep, result.steps},
                  {key::kLoss, result.last_epoch.train_loss},
                  {key::kTrainAccuracy, result.last_epoch.train_accuracy}};
  if (result.evaluated) summary[std::string(key::kTestAccuracy)] = result.last_epoch.test_accuracy;
  if (result.saved_step >= 0) summary[std::string(key::kSavedStep)] = result.saved_step;
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
