#include "train/fence.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "train/atomic_file.h"

namespace cifar::train {
namespace {

namespace fs = std::filesystem;

struct Held {
  fs::path file;
  int64_t incarnation = 0;
};

std::mutex fence_mu;
std::optional<Held> held;  // this process's fence, under fence_mu

fs::path fence_path(const TrainConfig& config, FenceSlot slot) {
  return fs::path(config.model_dir) /
         (run_name(config) + (slot == FenceSlot::kChief ? ".chief" : ".evaluator") + ".fence");
}

std::optional<FenceRecord> read_record(const fs::path& file) {
  std::ifstream in(file);
  if (!in) return std::nullopt;
  try {
    const auto json = nlohmann::json::parse(in);
    FenceRecord record;
    record.incarnation = json.at("incarnation").get<int64_t>();
    if (json.contains("resumed_step")) record.resumed_step = json["resumed_step"].get<int64_t>();
    return record;
  } catch (const std::exception& e) {  // written by rename: never half there
    throw std::runtime_error("fence " + file.string() + " cannot be read: " + e.what());
  }
}

void write_record(const fs::path& file, const FenceRecord& record) {
  nlohmann::json json = {{"incarnation", record.incarnation}};
  if (record.resumed_step) json["resumed_step"] = *record.resumed_step;
  replace_atomically(file, [&](const fs::path& temp) {
    std::ofstream(temp, std::ios::trunc) << json.dump() << "\n";
  });
}

std::string replaced_by(int64_t newer, int64_t own) {
  return "this pod was replaced by incarnation " + std::to_string(newer) + "; stopping (it is " +
         "incarnation " + std::to_string(own) + ", and writes nothing more into the run)";
}

// An exclusive flock on <file>.lock for the claims' read-compare-write: two pods starting at once
// cannot both take the slot.
class ClaimLock {
 public:
  explicit ClaimLock(const fs::path& file)
      : fd_(::open((file.string() + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644)) {
    if (fd_ < 0 || ::flock(fd_, LOCK_EX) != 0) {
      const std::string why = std::strerror(errno);
      if (fd_ >= 0) ::close(fd_);
      throw std::runtime_error("cannot lock " + file.string() + ".lock: " + why);
    }
  }
  ~ClaimLock() { ::close(fd_); }  // releases the lock
  ClaimLock(const ClaimLock&) = delete;
  ClaimLock& operator=(const ClaimLock&) = delete;

 private:
  int fd_;
};

// This process's fence, if it holds one.
std::optional<Held> held_fence() {
  const std::lock_guard guard(fence_mu);
  return held;
}

// Throws Replaced when the slot's file names a newer incarnation than `mine`.
void check_not_replaced(const Held& mine) {
  const auto record = read_record(mine.file);
  if (record && record->incarnation > mine.incarnation) {
    throw Replaced(replaced_by(record->incarnation, mine.incarnation));
  }
}

}  // namespace

std::optional<FenceRecord> read_fence(const TrainConfig& config, FenceSlot slot) {
  return read_record(fence_path(config, slot));
}

void claim_fence(const TrainConfig& config, FenceSlot slot) {
  if (config.incarnation <= 0) return;
  const auto file = fence_path(config, slot);
  fs::create_directories(file.parent_path());
  const ClaimLock lock(file);
  const auto record = read_record(file);
  if (record && record->incarnation > config.incarnation) {
    throw Replaced(replaced_by(record->incarnation, config.incarnation));
  }
  if (!record || record->incarnation < config.incarnation) {
    write_record(file, {config.incarnation, std::nullopt});
  }
  const std::lock_guard guard(fence_mu);
  held = Held{file, config.incarnation};
}

void record_resumed_step(int64_t step) {
  const auto mine = held_fence();
  if (!mine) return;
  const ClaimLock lock(mine->file);
  check_not_replaced(*mine);
  write_record(mine->file, {mine->incarnation, step});
}

void check_fence() {
  if (const auto mine = held_fence()) check_not_replaced(*mine);
}

int64_t fence_incarnation() {
  const std::lock_guard guard(fence_mu);
  return held ? held->incarnation : 0;
}

void release_fence() {
  const std::lock_guard guard(fence_mu);
  held.reset();
}

bool is_stale_checkpoint(const std::optional<FenceRecord>& chief, int64_t written_by,
                         int64_t step) {
  return chief && written_by < chief->incarnation && chief->resumed_step &&
         step > *chief->resumed_step;
}

}  // namespace cifar::train
