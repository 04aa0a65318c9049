#include "train/cpu_cores.h"

#include <sched.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "contract/whole_number.h"

namespace cifar::train {
namespace {

// A cgroup file's number, without the newline the kernel ends it with; -1 (v1: no quota) is none.
std::optional<int64_t> whole_number(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  return contract::whole_number(text);
}

std::optional<int> cores_of(int64_t quota, int64_t period) {
  if (quota <= 0 || period <= 0) return std::nullopt;
  return static_cast<int>((quota + period - 1) / period);
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

std::optional<int> cores_of_cpu_max(std::string_view cpu_max) {
  const auto space = cpu_max.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  const auto quota = whole_number(cpu_max.substr(0, space));  // "max": no limit
  const auto period = whole_number(cpu_max.substr(space + 1));
  if (!quota || !period) return std::nullopt;
  return cores_of(*quota, *period);
}

std::optional<int> cores_of_cfs_quota(std::string_view quota_us, std::string_view period_us) {
  const auto quota = whole_number(quota_us);
  const auto period = whole_number(period_us);
  if (!quota || !period) return std::nullopt;
  return cores_of(*quota, *period);
}

UsableCores usable_cores(const std::filesystem::path& cgroup_root) {
  UsableCores usable;
  usable.cores = static_cast<int>(std::max(1U, std::thread::hardware_concurrency()));
  cpu_set_t affinity;
  CPU_ZERO(&affinity);
  if (::sched_getaffinity(0, sizeof(affinity), &affinity) == 0) {
    usable.cores = std::max(1, std::min(usable.cores, CPU_COUNT(&affinity)));
  }
  usable.cpu_limit = cores_of_cpu_max(read_file(cgroup_root / "cpu.max"));
  if (!usable.cpu_limit) {
    usable.cpu_limit = cores_of_cfs_quota(read_file(cgroup_root / "cpu" / "cpu.cfs_quota_us"),
                                          read_file(cgroup_root / "cpu" / "cpu.cfs_period_us"));
  }
  if (usable.cpu_limit) usable.cores = std::max(1, std::min(usable.cores, *usable.cpu_limit));
  return usable;
}

}  // namespace cifar::train
