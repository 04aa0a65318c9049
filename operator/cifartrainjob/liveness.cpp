#include "cifartrainjob/liveness.h"

namespace cifar::op {

bool merge_heard(JobLiveness& known, const JobLiveness& answered, const MissedPods& missed) {
  bool changed = false;
  for (const auto& [name, heard] : answered) {
    const auto found = known.find(name);
    changed = changed || found == known.end() || found->second.uid != heard.uid ||
              found->second.stall_report != heard.stall_report ||
              found->second.missed_scrapes >= kSilentAfterMissed;
    known[name] = heard;
  }
  for (const auto& [name, uid] : missed) {
    auto& record = known[name];
    if (record.uid != uid) {  // first heard of, or made again under its name
      record = PodLiveness{};
      record.uid = uid;
    }
    if (++record.missed_scrapes == kSilentAfterMissed) changed = true;
  }
  return changed;
}

}  // namespace cifar::op
