#include "cifartrainjob/store_outage.h"

#include <string>

namespace cifar::op {

void report_store_outage(const Job& job, Clock::time_point now, Plan& plan) {
  auto& status = plan.status;
  if (!status.progress.is_object() || !status.progress.contains("checkpoint")) return;
  const auto& checkpoint = status.progress["checkpoint"];
  const auto* current = status.condition(ConditionType::kCheckpointStoreUnreachable);
  const auto since = checkpoint.value("storeUnreachableSince", "");
  const auto saved = checkpoint.contains("savedStep")
                         ? "step " + std::to_string(checkpoint["savedStep"].get<int64_t>())
                         : std::string("none yet");
  if (since.empty()) {
    if (current == nullptr || current->status != ConditionStatus::kTrue) return;
    const auto message =
        "the checkpoint store answers again; the newest checkpoint saved: " + saved;
    status.set_condition(ConditionType::kCheckpointStoreUnreachable, false, reason::kStoreAnswers,
                         message, to_time(now));
    plan.events.push_back({"Normal", std::string(reason::kStoreAnswers), message});
    return;
  }
  // The message names the time the outage began, not the step: one Event an outage.
  const auto message = "the checkpoint store has not answered since " + since +
                       "; training goes on and the newest checkpoint waits to be saved (the job "
                       "fails if the store stays away longer than checkpoint.maxUnsavedSeconds, " +
                       std::to_string(job.spec.max_unsaved_seconds) + " s)";
  const bool news = current == nullptr || current->status != ConditionStatus::kTrue ||
                    current->message != message;
  if (!news) return;
  status.set_condition(ConditionType::kCheckpointStoreUnreachable, true, reason::kStoreNotAnswering,
                       message, to_time(now));
  plan.events.push_back({"Warning", std::string(reason::kStoreNotAnswering), message});
}

}  // namespace cifar::op
