#include "api/status.h"

#include <algorithm>
#include <stdexcept>

namespace cifar::op {
namespace {

using nlohmann::json;

constexpr std::array<std::string_view, 3> kStatusNames = {"True", "False", "Unknown"};

ConditionType condition_type_from(const std::string& name, const char* field) {
  const auto type = parse_condition_type(name);
  if (!type) throw std::invalid_argument(std::string("status.") + field + ": '" + name + "'");
  return *type;
}

ConditionStatus condition_status_from(const std::string& name) {
  for (size_t i = 0; i < kStatusNames.size(); ++i) {
    if (kStatusNames[i] == name) return static_cast<ConditionStatus>(i);
  }
  throw std::invalid_argument("status.conditions[].status: '" + name + "'");
}

std::optional<Time> time_from(const json& object, const char* field) {
  const auto found = object.find(field);
  if (found == object.end()) return std::nullopt;
  return parse_time(found->get<std::string>());
}

void write_time(json& object, const char* field, const std::optional<Time>& t) {
  if (t) object[field] = format_time(*t);
}

json condition_json(const JobCondition& c) {
  json out = {{"type", condition_type_name(c.type)},
              {"status", kStatusNames.at(static_cast<size_t>(c.status))},
              {"reason", c.reason},
              {"message", c.message}};
  write_time(out, "lastTransitionTime", c.last_transition_time);
  write_time(out, "lastUpdateTime", c.last_update_time);
  return out;
}

JobCondition condition_from(const json& c) {
  JobCondition out;
  out.type = condition_type_from(c.at("type").get<std::string>(), "conditions[].type");
  out.status = condition_status_from(c.at("status").get<std::string>());
  out.reason = c.value("reason", "");
  out.message = c.value("message", "");
  out.last_transition_time = time_from(c, "lastTransitionTime");
  out.last_update_time = time_from(c, "lastUpdateTime");
  return out;
}

const std::array<const char*, 16> kKnownFields = {
    "state",       "conditions",   "replicaStatuses", "startTime", "completionTime", "restarts",
    "podRestarts", "progress",     "reason",          "message",   "modelDir",       "incarnation",
    "nodeLoss",    "stallsByNode", "suspectNodes",    "workers"};

}  // namespace

std::string_view condition_type_name(ConditionType type) {
  switch (type) {
    case ConditionType::kCreated:
      return "Created";
    case ConditionType::kQueued:
      return "Queued";
    case ConditionType::kRunning:
      return "Running";
    case ConditionType::kRestarting:
      return "Restarting";
    case ConditionType::kSucceeded:
      return "Succeeded";
    case ConditionType::kFailed:
      return "Failed";
    case ConditionType::kSuspended:
      return "Suspended";
    case ConditionType::kPodsNotReady:
      return "PodsNotReady";
    case ConditionType::kTrainersMissing:
      return "TrainersMissing";
    case ConditionType::kCheckpointStoreUnreachable:
      return "CheckpointStoreUnreachable";
    case ConditionType::kStalled:
      return "Stalled";
  }
  return "";
}

std::optional<ConditionType> parse_condition_type(std::string_view name) {
  for (const auto type : kConditionTypes) {
    if (condition_type_name(type) == name) return type;
  }
  return std::nullopt;
}

bool is_exclusive(ConditionType type) {
  return type != ConditionType::kCreated && type != ConditionType::kPodsNotReady &&
         type != ConditionType::kTrainersMissing &&
         type != ConditionType::kCheckpointStoreUnreachable && type != ConditionType::kStalled;
}

const JobCondition* JobStatus::condition(ConditionType type) const {
  if (!conditions) return nullptr;
  for (const auto& c : *conditions) {
    if (c.type == type) return &c;
  }
  return nullptr;
}

bool JobStatus::is_true(ConditionType type) const {
  const auto* c = condition(type);
  return c != nullptr && c->status == ConditionStatus::kTrue;
}

bool JobStatus::finished() const {
  return is_true(ConditionType::kSucceeded) || is_true(ConditionType::kFailed);
}

void JobStatus::set_condition(ConditionType type, bool value, std::string_view reason,
                              const std::string& message, Time now) {
  if (!conditions) conditions.emplace();
  const auto status = value ? ConditionStatus::kTrue : ConditionStatus::kFalse;
  for (auto& c : *conditions) {
    if (c.type != type) continue;
    if (c.status != status) c.last_transition_time = now;
    if (c.status != status || c.reason != reason) c.last_update_time = now;
    c.status = status;
    c.reason = reason;
    c.message = message;
    return;
  }
  if (!value) return;  // a condition that never held is not listed
  conditions->push_back({type, status, std::string(reason), message, now, now});
}

void JobStatus::set_state(ConditionType new_state, std::string_view reason,
                          const std::string& message, Time now) {
  for (const auto type : kConditionTypes) {
    if (is_exclusive(type) && type != new_state && is_true(type)) {
      set_condition(type, false, reason, message, now);
    }
  }
  set_condition(new_state, true, reason, message, now);
  state = new_state;
}

void JobStatus::summarize() {
  const JobCondition* why = nullptr;
  if (state &&
      (finished() || *state == ConditionType::kSuspended || *state == ConditionType::kQueued)) {
    why = condition(*state);
  } else if (is_true(ConditionType::kPodsNotReady)) {
    why = condition(ConditionType::kPodsNotReady);
  } else if (is_true(ConditionType::kStalled)) {
    why = condition(ConditionType::kStalled);
  } else if (is_true(ConditionType::kTrainersMissing)) {
    why = condition(ConditionType::kTrainersMissing);
  } else if (is_true(ConditionType::kCheckpointStoreUnreachable)) {
    why = condition(ConditionType::kCheckpointStoreUnreachable);
  }
  if (why == nullptr) {
    summary_reason.reset();
    summary_message.reset();
  } else {
    summary_reason = why->reason;
    summary_message = why->message;
  }
}

void from_json(const json& j, JobStatus& status) {
  status = JobStatus{};
  if (j.is_null()) return;
  if (const auto s = j.find("state"); s != j.end()) {
    status.state = condition_type_from(s->get<std::string>(), "state");
  }
  if (const auto c = j.find("conditions"); c != j.end()) {
    auto& conditions = status.conditions.emplace();
    for (const auto& item : *c) conditions.push_back(condition_from(item));
  }
  if (const auto r = j.find("replicaStatuses"); r != j.end()) {
    auto& replicas = status.replica_statuses.emplace();
    for (const auto& [type, counts] : r->items()) {
      replicas[type] = {counts.value("active", 0), counts.value("ready", 0),
                        counts.value("succeeded", 0), counts.value("failed", 0)};
    }
  }
  status.start_time = time_from(j, "startTime");
  status.completion_time = time_from(j, "completionTime");
  if (const auto r = j.find("restarts"); r != j.end()) status.restarts = r->get<int64_t>();
  if (const auto r = j.find("podRestarts"); r != j.end() && r->is_object()) {
    status.pod_restarts = r->get<std::map<std::string, int64_t>>();
  }
  status.progress = j.value("progress", json());
  if (const auto d = j.find("modelDir"); d != j.end()) status.model_dir = d->get<std::string>();
  if (const auto i = j.find("incarnation"); i != j.end()) status.incarnation = i->get<int64_t>();
  if (const auto n = j.find("nodeLoss"); n != j.end() && n->is_object()) {
    auto& loss = status.node_loss.emplace();
    loss.node = n->value("node", "");
    loss.pods = n->value("pods", std::vector<std::string>{});
    loss.step = n->value("step", int64_t{-1});
    if (const auto since = time_from(*n, "since")) loss.since = *since;
  }
  if (const auto s = j.find("stallsByNode"); s != j.end() && s->is_object()) {
    status.stalls_by_node = s->get<std::map<std::string, int64_t>>();
  }
  if (const auto s = j.find("suspectNodes"); s != j.end() && s->is_array()) {
    status.suspect_nodes = s->get<std::vector<std::string>>();
  }
  if (const auto w = j.find("workers"); w != j.end() && w->is_object()) {
    auto& workers = status.workers.emplace();
    workers.training = w->value("training", 0);
    workers.desired = w->value("desired", 0);
    workers.selector = w->value("selector", "");
    workers.reason = w->value("reason", "");
    workers.message = w->value("message", "");
  }
  if (const auto r = j.find("reason"); r != j.end()) status.summary_reason = r->get<std::string>();
  if (const auto m = j.find("message"); m != j.end()) {
    status.summary_message = m->get<std::string>();
  }
  for (const auto& [field, value] : j.items()) {
    if (std::find(kKnownFields.begin(), kKnownFields.end(), field) == kKnownFields.end()) {
      status.other[field] = value;
    }
  }
}

void to_json(json& j, const JobStatus& status) {
  j = status.other.is_object() ? status.other : json::object();
  if (status.state) j["state"] = condition_type_name(*status.state);
  if (status.conditions) {
    j["conditions"] = json::array();
    for (const auto& c : *status.conditions) j["conditions"].push_back(condition_json(c));
  }
  if (status.replica_statuses) {
    j["replicaStatuses"] = json::object();
    for (const auto& [type, r] : *status.replica_statuses) {
      j["replicaStatuses"][type] = {{"active", r.active},
                                    {"ready", r.ready},
                                    {"succeeded", r.succeeded},
                                    {"failed", r.failed}};
    }
  }
  write_time(j, "startTime", status.start_time);
  write_time(j, "completionTime", status.completion_time);
  if (status.restarts) j["restarts"] = *status.restarts;
  if (status.pod_restarts) j["podRestarts"] = *status.pod_restarts;
  if (!status.progress.is_null()) j["progress"] = status.progress;
  if (status.model_dir) j["modelDir"] = *status.model_dir;
  if (status.incarnation) j["incarnation"] = *status.incarnation;
  if (status.node_loss) {
    const auto& loss = *status.node_loss;
    j["nodeLoss"] = {{"node", loss.node}, {"pods", loss.pods}, {"step", loss.step}};
    write_time(j["nodeLoss"], "since", loss.since);
  }
  if (status.stalls_by_node) j["stallsByNode"] = *status.stalls_by_node;
  if (status.suspect_nodes) j["suspectNodes"] = *status.suspect_nodes;
  if (status.workers) {
    const auto& w = *status.workers;
    j["workers"] = {{"training", w.training},
                    {"desired", w.desired},
                    {"summary", std::to_string(w.training) + "/" + std::to_string(w.desired)},
                    {"selector", w.selector}};
    if (!w.reason.empty()) j["workers"]["reason"] = w.reason;
    if (!w.message.empty()) j["workers"]["message"] = w.message;
  }
  if (status.summary_reason) j["reason"] = *status.summary_reason;
  if (status.summary_message) j["message"] = *status.summary_message;
}

}  // namespace cifar::op
