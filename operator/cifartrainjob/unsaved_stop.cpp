#include "cifartrainjob/unsaved_stop.h"

#include <string>

#include "cifartrainjob/desired_state.h"
#include "contract/roles.h"
#include "framework/pod_status.h"

namespace cifar::op {

namespace {
constexpr int kKilled = 128 + 9;  // SIGKILL
}  // namespace

bool killed_at_end_of_grace(const nlohmann::json& pod) {
  if (!pod_terminating(pod)) return false;
  const auto ended = pod_container_ended(pod);
  return ended && ended->exit_code == kKilled && ended->reason != "OOMKilled";
}

std::optional<EventRecord> unsaved_stop_event(const Job& job, const nlohmann::json& deleted_pod) {
  if (!killed_at_end_of_grace(deleted_pod)) return std::nullopt;
  const auto& metadata = deleted_pod["metadata"];
  const auto name = metadata.value("name", "");
  const auto role = pod_role(deleted_pod);
  const bool saves = name == chief_name(job) ||
                     (job.spec.parameter_server && role && *role == contract::Role::kPs);
  if (!saves) return std::nullopt;
  const auto grace = deleted_pod.value("spec", nlohmann::json::object())
                         .value("terminationGracePeriodSeconds", int64_t{30});
  return EventRecord{
      "Warning", std::string(reason::kStopNotSaved),
      "pod " + name + " was killed when its grace period of " + std::to_string(grace) +
          " s ran out, before its graceful stop had saved the job's state (exit code 137): the "
          "job goes on from its last checkpoint and loses the steps since. Give the replica's "
          "pod template a terminationGracePeriodSeconds longer than a step and a checkpoint "
          "take"};
}

}  // namespace cifar::op
