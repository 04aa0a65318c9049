// A JSON-lines object in the run's store (monitor.jsonl, evaluation.jsonl). Object storage has no
// append, so appending writes the object whole again: one line an epoch or an evaluation keeps
// that small. A line that does not parse (a file cut short by a crash) is dropped on reading.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace cifar::storage {
class Store;
}

namespace cifar::train {

class JsonLinesObject {
 public:
  // Reads what is there already.
  JsonLinesObject(std::shared_ptr<storage::Store> store, std::string name);

  void append(const nlohmann::json& record);
  // Keeps only the records `keep` holds for, and writes that.
  void keep_only(const std::function<bool(const nlohmann::json&)>& keep);
  [[nodiscard]] const std::vector<nlohmann::json>& records() const { return records_; }

 private:
  void write() const;

  std::shared_ptr<storage::Store> store_;
  std::string name_;
  std::vector<nlohmann::json> records_;
};

}  // namespace cifar::train
