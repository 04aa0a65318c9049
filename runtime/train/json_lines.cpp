#include "train/json_lines.h"

#include <sstream>

#include "storage/store.h"
#include "train/background_writer.h"

namespace cifar::train {

JsonLinesObject::JsonLinesObject(std::shared_ptr<storage::Store> store, std::string name,
                                 Writes writes, Fence fence)
    : store_(std::move(store)), fence_(std::move(fence)), name_(std::move(name)) {
  if (writes == Writes::kInBackground) {
    writer_ = std::make_unique<BackgroundWriter>(
        [store = store_, fence = fence_](const PendingWrite& write) {
          fence.check();  // a replaced writer records nothing
          store->put(write.name, write.bytes);
        },
        BackgroundWriter::OnClose::kWriteWaiting);
  }
  const auto text = store_->get(name_);
  if (!text) return;
  std::istringstream lines(*text);
  for (std::string line; std::getline(lines, line);) {
    auto record = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (record.is_object()) records_.push_back(std::move(record));
  }
}

void JsonLinesObject::append(const nlohmann::json& record) {
  records_.push_back(record);
  write();
}

void JsonLinesObject::keep_only(const std::function<bool(const nlohmann::json&)>& keep) {
  std::vector<nlohmann::json> kept;
  for (auto& record : records_) {
    if (keep(record)) kept.push_back(std::move(record));
  }
  records_ = std::move(kept);
  write();
}

JsonLinesObject::~JsonLinesObject() = default;

void JsonLinesObject::write() {
  std::string text;
  for (const auto& record : records_) text += record.dump() + "\n";
  if (writer_) {
    writer_->submit({name_, std::move(text), static_cast<int64_t>(records_.size())});
  } else {
    fence_.check();
    store_->put(name_, text);
  }
}

void JsonLinesObject::wait_until_saved() {
  if (writer_) writer_->wait_until_saved();
}

void JsonLinesObject::raise_if_failed() {
  if (writer_) writer_->raise_if_failed();
}

}  // namespace cifar::train
