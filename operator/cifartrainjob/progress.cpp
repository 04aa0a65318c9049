#include "cifartrainjob/progress.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <stdexcept>

#include "contract/metrics.h"
#include "contract/roles.h"
#include "contract/termination.h"
#include "framework/clock.h"

namespace cifar::op {
namespace {

using nlohmann::json;
namespace metric = contract::metric;
using contract::Role;

const PodMetrics* find(const std::vector<PodMetrics>& pods, Role role, int index) {
  for (const auto& pod : pods) {
    if (pod.role == contract::role_name(role) && pod.index == index) return &pod;
  }
  return nullptr;
}

std::optional<double> sample(const PodMetrics* pod, const std::string& name) {
  if (pod == nullptr) return std::nullopt;
  const auto found = pod->samples.find(name);
  if (found == pod->samples.end()) return std::nullopt;
  return found->second;
}

// How much of a new estimate goes into the one reported, the rest being the previous one,
// counted down: the rate over one scrape interval swings with evaluations and checkpoints (on a
// real 5.5-minute CIFAR-10 job it put the end up to 105 s off; replaying that run, smoothing
// halves the mean error, 34 s to 18 s).
constexpr double kEstimateSmoothing = 0.3;

// Seconds until `total` at the rate since the previous progress was written (its updatedAt, in
// whole seconds), smoothed with the previous estimate; where that gives no rate (no step since,
// or not a second) the previous estimate stands.
std::optional<int64_t> remaining_seconds(double step, double total, const json& previous,
                                         const std::string& now) {
  if (!previous.contains("step") || !previous.contains("updatedAt")) return std::nullopt;
  const double steps = step - previous["step"].get<double>();
  double elapsed = 0;
  try {
    elapsed = static_cast<double>(
        (parse_time(now) - parse_time(previous["updatedAt"].get<std::string>())).count());
  } catch (const std::exception&) {
    return std::nullopt;
  }
  const auto last = previous.contains("estimatedRemainingSeconds")
                        ? std::optional<double>(previous["estimatedRemainingSeconds"].get<double>())
                        : std::nullopt;
  if (steps <= 0 || elapsed <= 0) {
    return last ? std::optional<int64_t>(std::llround(*last)) : std::nullopt;
  }
  double estimate = (total - step) * elapsed / steps;
  if (last) {
    estimate =
        kEstimateSmoothing * estimate + (1 - kEstimateSmoothing) * std::max(*last - elapsed, 0.0);
  }
  return std::llround(std::ceil(estimate));
}

}  // namespace

MetricSamples parse_metric_samples(const std::string& exposition) {
  MetricSamples samples;
  std::istringstream lines(exposition);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#') continue;
    const auto name_end = line.find_first_of("{ ");
    if (name_end == std::string::npos || name_end == 0) continue;
    auto value_start = line[name_end] == '{' ? line.find('}', name_end) : name_end;
    if (value_start == std::string::npos) continue;
    value_start = line.find_first_not_of(' ', value_start + (line[name_end] == '{' ? 1 : 0));
    if (value_start == std::string::npos) continue;
    const char* begin = line.c_str() + value_start;
    char* end = nullptr;
    const double value = std::strtod(begin, &end);
    if (end == begin || !std::isfinite(value)) continue;  // NaN loss: nothing to report
    samples.emplace(line.substr(0, name_end), value);     // the first sample wins
  }
  return samples;
}

std::optional<json> job_progress(const std::vector<PodMetrics>& pods, const JobPods& job,
                                 const std::string& now, const json& previous) {
  const auto* chief = find(pods, job.has_master ? Role::kMaster : Role::kWorker, 0);
  if (chief == nullptr) return std::nullopt;
  json progress = {{"updatedAt", now}};
  if (const auto epoch = sample(chief, metric::kEpoch)) progress["epoch"] = std::llround(*epoch);
  // The job's step (a runtime before cifar_job_step had only its own steps to tell).
  auto step = sample(chief, metric::kJobStep);
  if (!step) step = sample(chief, metric::kSteps);
  if (step) progress["step"] = std::llround(*step);
  const auto total = sample(chief, metric::kJobTotalSteps);
  if (step && total && *total > 0) {
    progress["progressPercentage"] =
        static_cast<int>(std::floor(100 * std::clamp(*step / *total, 0.0, 1.0)));
    if (*step >= *total) {
      progress["estimatedRemainingSeconds"] = 0;
    } else if (const auto eta = remaining_seconds(*step, *total, previous, now)) {
      progress["estimatedRemainingSeconds"] = *eta;
    }
  }
  if (const auto loss = sample(chief, metric::kLoss)) progress["loss"] = *loss;
  if (const auto accuracy = sample(chief, metric::kTrainAccuracy)) {
    progress["trainAccuracy"] = *accuracy;
  }
  double images_per_second = 0;
  bool any_trainer = false;
  for (const auto& pod : pods) {
    const auto role = contract::parse_role(pod.role);
    if (!role || !contract::is_trainer(*role)) continue;
    if (const auto rate = sample(&pod, metric::kImagesPerSecond)) {
      images_per_second += *rate;
      any_trainer = true;
    }
  }
  // to 0.1 image/s: `kubectl get ctj` prints the number as stored
  if (any_trainer) progress["imagesPerSecond"] = std::round(images_per_second * 10) / 10;
  const auto test_accuracy =
      sample(job.has_evaluator ? find(pods, Role::kEvaluator, 0) : chief, metric::kTestAccuracy);
  if (test_accuracy && *test_accuracy > 0) progress["testAccuracy"] = *test_accuracy;
  return progress;
}

json final_progress(json last, const std::string& chief_message,
                    const std::string& evaluator_message, bool succeeded, const std::string& now) {
  namespace key = contract::termination;
  if (!last.is_object()) last = json::object();
  last.erase("estimatedRemainingSeconds");
  const auto figures = [](const std::string& message) {
    auto parsed = json::parse(message, nullptr, /*allow_exceptions=*/false);
    return parsed.is_object() ? parsed : json::object();
  };
  const auto chief = figures(chief_message);
  for (const auto field :
       {key::kEpoch, key::kStep, key::kLoss, key::kTrainAccuracy, key::kTestAccuracy}) {
    if (const auto value = chief.find(field); value != chief.end() && value->is_number()) {
      last[std::string(field)] = *value;
    }
  }
  // The evaluator's accuracy is the final one only if it measured the chief's last step (an
  // evaluator that ended on an earlier run's done marker did not).
  const auto evaluator = figures(evaluator_message);
  const auto accuracy = evaluator.find(key::kTestAccuracy);
  const auto evaluated = evaluator.find(key::kStep);
  const auto chief_step = chief.find(key::kStep);
  const bool of_the_last_step =
      chief_step == chief.end() || (evaluated != evaluator.end() && *evaluated == *chief_step);
  if (accuracy != evaluator.end() && accuracy->is_number() && of_the_last_step) {
    last[std::string(key::kTestAccuracy)] = *accuracy;
  }
  if (succeeded) last["progressPercentage"] = 100;
  last["updatedAt"] = now;
  return last;
}

}  // namespace cifar::op
