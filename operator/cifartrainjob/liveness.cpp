#include "cifartrainjob/liveness.h"

namespace cifar::op {

bool merge_heard(JobLiveness& known, const JobLiveness& answered,
                 const std::vector<std::string>& missed) {
  bool changed = false;
  for (const auto& [name, heard] : answered) {
    const auto found = known.find(name);
    changed = changed || found == known.end() || found->second.uid != heard.uid ||
              found->second.stall_report != heard.stall_report ||
              found->second.missed_scrapes >= kSilentAfterMissed;
    known[name] = heard;
  }
  for (const auto& name : missed) {
    const auto found = known.find(name);
    if (found == known.end()) continue;
    if (++found->second.missed_scrapes == kSilentAfterMissed) changed = true;
  }
  return changed;
}

}  // namespace cifar::op
