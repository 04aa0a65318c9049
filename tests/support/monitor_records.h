// Test support: a run's monitor.jsonl as its chief appended it: the epochs in order, and whether
// each epoch trained every sample of its set once (the records' sample tallies, train/monitor.h).
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace cifar::testing {

inline std::vector<nlohmann::json> monitor_records(const std::filesystem::path& run_dir) {
  std::ifstream monitor(run_dir / "monitor.jsonl");
  std::vector<nlohmann::json> records;
  for (std::string line; std::getline(monitor, line);)
    records.push_back(nlohmann::json::parse(line));
  return records;
}

// The epochs of the run's records, in the order the chief appended them.
inline std::vector<int> recorded_epochs(const std::filesystem::path& run_dir) {
  std::vector<int> epochs;
  for (const auto& record : monitor_records(run_dir)) epochs.push_back(record["epoch"].get<int>());
  return epochs;
}

// What an epoch that trained each of the samples 0..n-1 once records: {count, index_sum,
// index_square_sum}.
inline nlohmann::json each_sample_once(int64_t n) {
  return {{"count", n},
          {"index_sum", n * (n - 1) / 2},
          {"index_square_sum", (n - 1) * n * (2 * n - 1) / 6}};
}

// The records whose sample tally is not each_sample_once(n) (none: every epoch trained each
// sample once).
inline std::vector<nlohmann::json> epochs_not_training_each_sample_once(
    const std::filesystem::path& run_dir, int64_t n) {
  std::vector<nlohmann::json> off;
  for (const auto& record : monitor_records(run_dir)) {
    if (record.value("samples", nlohmann::json()) != each_sample_once(n)) off.push_back(record);
  }
  return off;
}

}  // namespace cifar::testing
