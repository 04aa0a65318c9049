#include "train/monitor.h"

#include "storage/store.h"

namespace cifar::train {

MonitorLog::MonitorLog(const std::string& model_dir)
    : MonitorLog(std::shared_ptr<storage::Store>(storage::open_store(model_dir)), Fence()) {}

MonitorLog::MonitorLog(std::shared_ptr<storage::Store> store, Fence fence)
    : log_(std::move(store), kFileName, JsonLinesObject::Writes::kInBackground, std::move(fence)) {}

SampleTally SampleTally::of(const std::vector<int64_t>& indices) {
  SampleTally tally;
  for (const auto index : indices) {
    tally.count += 1;
    tally.index_sum += index;
    tally.index_square_sum += index * index;
  }
  return tally;
}

SampleTally& SampleTally::operator+=(const SampleTally& other) {
  count += other.count;
  index_sum += other.index_sum;
  index_square_sum += other.index_square_sum;
  return *this;
}

void MonitorLog::append(const EpochRecord& r) {
  nlohmann::json record = {
      {"epoch", r.epoch},
      {"step", r.step},
      {"train_loss", r.train_loss},
      {"train_accuracy", r.train_accuracy},
      {"test_loss", r.test_loss},
      {"test_accuracy", r.test_accuracy},
      {"learning_rate", r.learning_rate},
      {"images_per_second", r.images_per_second},
      {"seconds", r.seconds},
  };
  if (r.samples) {
    record["samples"] = {{"count", r.samples->count},
                         {"index_sum", r.samples->index_sum},
                         {"index_square_sum", r.samples->index_square_sum}};
  }
  log_.append(record);
}

void MonitorLog::truncate_after(int64_t epoch) {
  log_.keep_only(
      [&](const nlohmann::json& record) { return record.value("epoch", int64_t{0}) <= epoch; });
}

}  // namespace cifar::train
