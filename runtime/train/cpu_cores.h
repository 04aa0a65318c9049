// How many cores this process may use: the machine's, narrowed by its CPU affinity and by the CPU
// limit of its cgroup (a container's `resources.limits.cpu`). Intra-op threads beyond that only
// spin: four 2-thread trainings on 2 cores took 3.4x the CPU of four 1-thread ones.
#pragma once

#include <filesystem>
#include <optional>
#include <string_view>

namespace cifar::train {

// The cores a cgroup v2 `cpu.max` ("QUOTA PERIOD", or "max PERIOD" for none) allows, rounded up;
// nullopt without a limit or for text that is not one.
std::optional<int> cores_of_cpu_max(std::string_view cpu_max);
// The same for cgroup v1's cpu.cfs_quota_us (-1: none) and cpu.cfs_period_us.
std::optional<int> cores_of_cfs_quota(std::string_view quota_us, std::string_view period_us);

// The cores this process may use (at least 1), and the CPU limit that narrowed them, if any.
struct UsableCores {
  int cores = 1;
  std::optional<int> cpu_limit;  // from the cgroup, in whole cores
};
// `cgroup_root`: where this process's cgroup is mounted (a container sees its own there: cgroup
// v2's cpu.max, or v1's cpu/cpu.cfs_quota_us and cpu/cpu.cfs_period_us).
UsableCores usable_cores(const std::filesystem::path& cgroup_root = "/sys/fs/cgroup");

}  // namespace cifar::train
