#include "train/fence.h"

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "storage/store.h"
#include "train/run_store.h"

namespace cifar::train {
namespace {

namespace fs = std::filesystem;

std::string fence_name(const TrainConfig& config, FenceSlot slot) {
  return run_name(config) + (slot == FenceSlot::kChief ? ".chief" : ".evaluator") + ".fence";
}

FenceRecord parse_record(const std::string& text, const std::string& where) {
  try {
    const auto json = nlohmann::json::parse(text);
    FenceRecord record;
    record.incarnation = json.at("incarnation").get<int64_t>();
    if (json.contains("resumed_step")) record.resumed_step = json["resumed_step"].get<int64_t>();
    record.job_uid = json.value("job", "");
    return record;
  } catch (const std::exception& e) {  // written whole: never half there
    throw std::runtime_error("fence " + where + " cannot be read: " + e.what());
  }
}

std::string record_text(const FenceRecord& record) {
  nlohmann::json json = {{"incarnation", record.incarnation}};
  if (record.resumed_step) json["resumed_step"] = *record.resumed_step;
  if (!record.job_uid.empty()) json["job"] = record.job_uid;
  return json.dump() + "\n";
}

std::optional<FenceRecord> read_record(const storage::Store& store, const std::string& name) {
  const auto text = store.get(name);
  if (!text) return std::nullopt;
  return parse_record(*text, store.location_of(name));
}

// Incarnations are numbered per job. A record of another job is one that continued this run
// (checkpoint.resumeFrom), which a claim takes over from and a check stops for.
bool same_job(const FenceRecord& record, const std::string& job_uid) {
  return record.job_uid.empty() || job_uid.empty() || record.job_uid == job_uid;
}

[[noreturn]] void throw_taken_over(const FenceRecord& record) {
  throw RunTakenOver("job " + record.job_uid +
                     " continues this run now (checkpoint.resumeFrom); stopping (this pod's job "
                     "writes nothing more into the run)");
}

// Writes what `next` makes of the slot's record as one compare-and-swap (Store::put_if), again
// while another writer gets in between: two pods starting at once cannot both take the slot.
// `next` throws Replaced when a newer incarnation holds the slot, and returns nullopt when there
// is nothing to write.
void update_record(
    storage::Store& store, const std::string& name,
    const std::function<std::optional<FenceRecord>(const std::optional<FenceRecord>&)>& next) {
  // Writers of one slot are a pod and perhaps its replacement: a few rounds settle it. More
  // means a store that refuses every conditional write (one that ignores If-Match would not).
  constexpr int kRounds = 20;
  for (int round = 0; round < kRounds; ++round) {
    const auto current = store.get_versioned(name);
    std::optional<FenceRecord> record;
    if (current) record = parse_record(current->bytes, store.location_of(name));
    const auto wanted = next(record);
    if (!wanted) return;
    if (store.put_if(name, record_text(*wanted),
                     current ? std::optional<std::string>(current->version) : std::nullopt)) {
      return;
    }
  }
  throw std::runtime_error("fence " + store.location_of(name) + ": " + std::to_string(kRounds) +
                           " conditional writes in a row lost to another writer");
}

// Throws Replaced when `record` names a newer incarnation of this job than `incarnation`, or
// (`another_job_too`) another job.
void check_record(const std::optional<FenceRecord>& record, int64_t incarnation,
                  const std::string& job_uid, bool another_job_too) {
  if (!record) return;
  if (!same_job(*record, job_uid)) {
    if (another_job_too) throw_taken_over(*record);
    return;
  }
  if (record->incarnation > incarnation)
    throw Replaced(record->incarnation, "it is incarnation " + std::to_string(incarnation) +
                                            ", and writes nothing more into the run");
}

}  // namespace

std::optional<FenceRecord> read_fence(const TrainConfig& config, FenceSlot slot) {
  return read_fence(*open_run_store(config), config, slot);
}

std::optional<FenceRecord> read_fence(const storage::Store& store, const TrainConfig& config,
                                      FenceSlot slot) {
  return read_record(store, fence_name(config, slot));
}

Fence::Fence(std::shared_ptr<storage::Store> store, std::string name, int64_t incarnation,
             std::string job_uid)
    : store_(std::move(store)),
      name_(std::move(name)),
      incarnation_(incarnation),
      job_uid_(std::move(job_uid)) {}

Fence Fence::claim(const TrainConfig& config, FenceSlot slot) {
  return claim(config, slot, config.incarnation);
}

Fence Fence::claim(const TrainConfig& config, FenceSlot slot, int64_t number) {
  if (config.incarnation <= 0) return {};
  std::shared_ptr<storage::Store> store = open_run_store(config);
  auto name = fence_name(config, slot);
  update_record(*store, name, [&](const std::optional<FenceRecord>& record) {
    check_record(record, number, config.job_uid, false);
    const bool held_already =
        record && record->incarnation == number && record->job_uid == config.job_uid;
    return held_already
               ? std::nullopt
               : std::optional<FenceRecord>(FenceRecord{number, std::nullopt, config.job_uid});
  });
  return {std::move(store), std::move(name), number, config.job_uid};
}

void Fence::record_resumed_step(int64_t step) const {
  if (!store_) return;
  update_record(*store_, name_, [&](const std::optional<FenceRecord>& record) {
    check_record(record, incarnation_, job_uid_, true);
    return std::optional<FenceRecord>(FenceRecord{incarnation_, step, job_uid_});
  });
}

void Fence::check() const {
  if (store_) check_record(read_record(*store_, name_), incarnation_, job_uid_, true);
}

bool is_stale_checkpoint(const std::optional<FenceRecord>& chief, int64_t written_by,
                         int64_t step) {
  return chief && written_by < chief->incarnation && chief->resumed_step &&
         step > *chief->resumed_step;
}

}  // namespace cifar::train
