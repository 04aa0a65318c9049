#include "train/json_lines.h"

#include <sstream>

#include "storage/store.h"

namespace cifar::train {

JsonLinesObject::JsonLinesObject(std::shared_ptr<storage::Store> store, std::string name)
    : store_(std::move(store)), name_(std::move(name)) {
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

void JsonLinesObject::write() const {
  std::string text;
  for (const auto& record : records_) text += record.dump() + "\n";
  store_->put(name_, text);
}

}  // namespace cifar::train
