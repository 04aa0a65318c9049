// A JSON-lines object in the run's store (monitor.jsonl, evaluation.jsonl). Object storage has no
// append, so appending writes the object whole again: one line an epoch or an evaluation keeps
// that small. A line that does not parse (a file cut short by a crash) is dropped on reading.
// Written where the caller is, or (the chief's monitor log) in the background, so that a store that
// is away does not stop training (background_writer.h), and then written to the end when the
// object closes (within the writer's grace); behind its writer's fence either way.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "train/fence.h"

namespace cifar::storage {
class Store;
}

namespace cifar::train {

class BackgroundWriter;

class JsonLinesObject {
 public:
  enum class Writes { kHere, kInBackground };
  // Reads what is there already. Each write is made behind `fence` (train/fence.h).
  JsonLinesObject(std::shared_ptr<storage::Store> store, std::string name,
                  Writes writes = Writes::kHere, Fence fence = {});
  ~JsonLinesObject();
  JsonLinesObject(JsonLinesObject&&) noexcept = default;
  JsonLinesObject& operator=(JsonLinesObject&&) noexcept = default;

  void append(const nlohmann::json& record);
  // Keeps only the records `keep` holds for, and writes that.
  void keep_only(const std::function<bool(const nlohmann::json&)>& keep);
  [[nodiscard]] const std::vector<nlohmann::json>& records() const { return records_; }
  // Written in the background: until what was appended is in the store, and whether a write
  // failed (BackgroundWriter's); written here, nothing to wait for.
  void wait_until_saved();
  void raise_if_failed();

 private:
  void write();

  std::shared_ptr<storage::Store> store_;
  Fence fence_;
  std::string name_;
  std::vector<nlohmann::json> records_;
  std::unique_ptr<BackgroundWriter> writer_;  // kInBackground
};

}  // namespace cifar::train
