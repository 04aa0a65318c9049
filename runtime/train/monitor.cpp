#include "train/monitor.h"

#include "storage/store.h"
#include "train/fence.h"

namespace cifar::train {

MonitorLog::MonitorLog(const std::string& model_dir)
    : MonitorLog(std::shared_ptr<storage::Store>(storage::open_store(model_dir))) {}

MonitorLog::MonitorLog(std::shared_ptr<storage::Store> store)
    : log_(std::move(store), kFileName, JsonLinesObject::Writes::kInBackground) {}

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
