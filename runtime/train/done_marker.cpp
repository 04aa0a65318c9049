#include "train/done_marker.h"

#include <nlohmann/json.hpp>
#include <string>

#include "storage/store.h"
#include "train/run_store.h"

namespace cifar::train {
namespace {

std::string marker_name(const TrainConfig& config) { return run_name(config) + ".done"; }

}  // namespace

void write_done_marker(const TrainConfig& config, const Fence& fence, int64_t final_step) {
  fence.check();
  open_run_store(config)->put(marker_name(config),
                              nlohmann::json{{"step", final_step}}.dump() + "\n");
}

std::optional<int64_t> read_done_marker(const storage::Store& store, const TrainConfig& config) {
  const auto text = store.get(marker_name(config));
  if (!text) return std::nullopt;
  const auto json = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object() || !json.contains("step")) return std::nullopt;
  return json["step"].get<int64_t>();
}

void remove_done_marker(const TrainConfig& config) {
  open_run_store(config)->remove(marker_name(config));
}

}  // namespace cifar::train
