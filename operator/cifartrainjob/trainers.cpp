#include "cifartrainjob/trainers.h"

#include "cifartrainjob/desired_state.h"

namespace cifar::op {
namespace {

using nlohmann::json;

// The pod of trainer `rank`: the master is rank 0, workers follow (contract: TF_CONFIG's order).
std::string trainer_pod(const Job& job, int rank) {
  const int masters = job.spec.count(Role::kMaster);
  return rank < masters ? pod_name(job, Role::kMaster, rank)
                        : pod_name(job, Role::kWorker, rank - masters);
}

std::string counted(const MissingTrainers& missing) {
  return std::to_string(missing.training) + " of " + std::to_string(missing.expected) + " trainers";
}

}  // namespace

MissingTrainers missing_trainers(const Job& job, const json& progress) {
  MissingTrainers missing;
  if (!progress.is_object()) return missing;
  const auto trainers = progress.value("trainers", json::object());
  const auto absent = trainers.value("missing", json::array());
  missing.all_training = trainers.contains("training") && absent.empty();
  missing.training = trainers.value("training", 0);
  missing.expected = trainers.value("expected", 0);
  if (progress.value("step", 0) <= 0) return missing;  // a synchronous job waits there for all
  for (const auto& trainer : absent) {
    if (!missing.who.empty()) missing.who += ", ";
    missing.who += trainer_pod(job, trainer.value("trainer", 0));
    if (trainer.contains("droppedAtStep")) {
      missing.any_dropped = true;
      missing.who += " dropped at step " + std::to_string(trainer["droppedAtStep"].get<int64_t>());
    } else {
      missing.who += " has not joined";
    }
  }
  return missing;
}

void report_missing_trainers(const Job& job, Clock::time_point now, Plan& plan) {
  auto& status = plan.status;
  const auto* current = status.condition(ConditionType::kTrainersMissing);
  const auto missing = missing_trainers(job, status.progress);
  if (missing.who.empty()) {
    // All back: only on the PS's word that every trainer trains, not for want of a reading.
    if (current == nullptr || current->status != ConditionStatus::kTrue || !missing.all_training) {
      return;
    }
    const auto message = "every trainer trains again (" + std::to_string(missing.training) +
                         " of " + std::to_string(missing.expected) + ")";
    status.set_condition(ConditionType::kTrainersMissing, false, reason::kAllTrainersTraining,
                         message, to_time(now));
    plan.events.push_back({"Normal", std::string(reason::kAllTrainersTraining), message});
    return;
  }
  const auto why = missing.any_dropped ? reason::kTrainerDropped : reason::kTrainerNotJoined;
  const auto message = missing.who + "; training on with " + counted(missing);
  const bool news = current == nullptr || current->status != ConditionStatus::kTrue ||
                    current->reason != why || current->message != message;
  if (!news) return;
  status.set_condition(ConditionType::kTrainersMissing, true, why, message, to_time(now));
  plan.events.push_back({"Warning", std::string(why), message});
}

std::string ended_with_fewer_trainers(const Job& job, const json& progress) {
  const auto missing = missing_trainers(job, progress);
  if (missing.who.empty()) return "";
  return "; it ended with " + counted(missing) + ": " + missing.who;
}

}  // namespace cifar::op
