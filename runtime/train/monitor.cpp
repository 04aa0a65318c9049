#include "train/monitor.h"

#include "storage/store.h"

namespace cifar::train {

MonitorLog::MonitorLog(const std::string& model_dir)
    : MonitorLog(std::shared_ptr<storage::Store>(storage::open_store(model_dir)), Fence()) {}

MonitorLog::MonitorLog(std::shared_ptr<storage::Store> store, Fence fence)
    : log_(std::move(store), kFileName, JsonLinesObject::Writes::kInBackground, std::move(fence)) {}

void MonitorLog::append(const EpochRecord& r) {
  log_.append({
      {"epoch", r.epoch},
      {"step", r.step},
      {"train_loss", r.train_loss},
      {"train_accuracy", r.train_accuracy},
      {"test_loss", r.test_loss},
      {"test_accuracy", r.test_accuracy},
      {"learning_rate", r.learning_rate},
      {"images_per_second", r.images_per_second},
      {"seconds", r.seconds},
  });
}

void MonitorLog::truncate_after(int64_t epoch) {
  log_.keep_only(
      [&](const nlohmann::json& record) { return record.value("epoch", int64_t{0}) <= epoch; });
}

}  // namespace cifar::train
