#include "cifartrainjob/failure_wording.h"

#include "contract/termination.h"
#include "framework/pod_status.h"

namespace cifar::op {

using nlohmann::json;

std::string describe_exit(const std::optional<int>& code) {
  return code ? "exit code " + std::to_string(*code) : "no exit code (evicted or lost)";
}

std::string failure_detail(const json* pod) {
  if (pod == nullptr) return "";
  const auto message = pod_termination_message(*pod);
  std::string detail;
  const auto parsed = json::parse(message, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_object()) {
    const auto error = parsed.find(contract::termination::kError);
    if (error != parsed.end() && error->is_string()) detail = error->get<std::string>();
  } else if (const auto end = message.find_last_not_of(" \n"); end != std::string::npos) {
    const auto newline = message.rfind('\n', end);
    const auto start = newline == std::string::npos ? 0 : newline + 1;
    detail = message.substr(start, end - start + 1);
  }
  // A runtime error names what failed first and what was kept last ("the newest checkpoint saved
  // is step N"), so a long one keeps both ends. 1000 characters fit an Event's note.
  constexpr size_t kKeptAtEachEnd = 490;
  if (detail.size() > 2 * kKeptAtEachEnd + 20) {
    detail = detail.substr(0, kKeptAtEachEnd) + " [...] " +
             detail.substr(detail.size() - kKeptAtEachEnd);
  }
  return detail.empty() ? "" : ": " + detail;
}

std::string last_in_place_failure(const PodsByName& pods) {
  const std::pair<const std::string, json>* last = nullptr;
  std::optional<Time> last_end;
  for (const auto& entry : pods) {
    if (pod_restarts(entry.second) == 0) continue;
    const auto ended = pod_finished_at(entry.second);
    if (ended && (!last_end || *ended > *last_end)) {
      last = &entry;
      last_end = ended;
    }
  }
  if (last == nullptr) return "";
  return "; the last, pod " + last->first + ", failed with " +
         describe_exit(pod_exit_code(last->second)) + failure_detail(&last->second);
}

}  // namespace cifar::op
