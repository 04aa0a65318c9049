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
  return op::sample(pod->samples, name);
}

// An all-reduce job's group training now: the workers that report the newest rendezvous round
// (contract/metrics.h), {round, size, workers: their indices}; nullopt when none trains in one, or
// when not every rank of that round was scraped (a partial view would name a worker as gone).
std::optional<json> world_of(const std::vector<PodMetrics>& pods) {
  const auto round_of = [](const PodMetrics& pod) -> std::optional<int64_t> {
    const auto size = sample(&pod, metric::kAllReduceWorldSize);
    const auto round = sample(&pod, metric::kAllReduceRound);
    if (pod.role != contract::role_name(Role::kWorker) || !size || *size < 1 || !round) {
      return std::nullopt;
    }
    return std::llround(*round);
  };
  std::optional<int64_t> newest;
  for (const auto& pod : pods) {
    if (const auto round = round_of(pod); round && (!newest || *round > *newest)) newest = round;
  }
  if (!newest) return std::nullopt;
  std::vector<int> workers;
  int64_t size = 0;
  for (const auto& pod : pods) {
    if (round_of(pod) != newest) continue;
    workers.push_back(pod.index);
    size = std::max<int64_t>(size, std::llround(*sample(&pod, metric::kAllReduceWorldSize)));
  }
  if (static_cast<int64_t>(workers.size()) != size) return std::nullopt;
  std::sort(workers.begin(), workers.end());
  return json{{"round", *newest}, {"size", size}, {"workers", workers}};
}

// A parameter server's per-trainer series (contract/metrics.h) by trainer rank: those that say
// whether the trainer takes part; labels that are not a rank are not ours.
std::map<int, const MetricSamples*> trainer_series(const PodMetrics& ps) {
  std::map<int, const MetricSamples*> by_rank;
  for (const auto& [rank, samples] : ps.by_trainer) {
    if (samples.count(metric::kPsTrainerTraining) == 0) continue;
    try {
      by_rank[std::stoi(rank)] = &samples;
    } catch (const std::exception&) {
      continue;
    }
  }
  return by_rank;
}

// A parameter-server job's world: the workers PS 0 says train now (its per-trainer series; worker
// i is trainer i + 1), and how many trainers that is with the master. nullopt: PS 0 not scraped,
// or nobody trains.
std::optional<json> ps_world_of(const PodMetrics* ps) {
  if (ps == nullptr) return std::nullopt;
  std::vector<int> workers;  // in order: the series are by rank
  int trainers = 0;
  for (const auto& [trainer, samples] : trainer_series(*ps)) {
    if (samples->at(metric::kPsTrainerTraining) <= 0) continue;
    ++trainers;
    if (trainer >= 1) workers.push_back(trainer - 1);
  }
  if (trainers == 0) return std::nullopt;
  return json{
      {"size", static_cast<int>(workers.size())}, {"workers", workers}, {"trainers", trainers}};
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

// status.progress.trainers from a parameter server's per-trainer series (contract/metrics.h);
// nullopt when it was not scraped or has none (not initialised yet, or not a PS).
std::optional<json> trainers_of(const PodMetrics* ps) {
  if (ps == nullptr) return std::nullopt;
  const auto by_rank = trainer_series(*ps);
  if (by_rank.empty()) return std::nullopt;
  int training = 0;
  json missing = json::array();
  for (const auto& [rank, samples] : by_rank) {
    if (samples->at(metric::kPsTrainerTraining) > 0) {
      ++training;
      continue;
    }
    json trainer = {{"trainer", rank}};
    if (const auto dropped = samples->find(metric::kPsTrainerDroppedAtStep);
        dropped != samples->end()) {
      trainer["droppedAtStep"] = std::llround(dropped->second);
    }
    missing.push_back(std::move(trainer));
  }
  return json{{"expected", static_cast<int>(by_rank.size())},
              {"training", training},
              {"missing", std::move(missing)}};
}

// One sample line of an exposition: `name{labels} value` or `name value`.
struct SampleLine {
  std::string name;
  std::string labels;  // between the braces, as written
  double value = 0;
};

// Where the label set that starts at `from` ends (its '}'), quoted values skipped: a value may
// hold braces and escaped quotes (a stall report names C++ functions); npos if it does not end.
size_t labels_end_at(const std::string& line, size_t from) {
  bool quoted = false;
  for (size_t i = from; i < line.size(); ++i) {
    if (quoted && line[i] == '\\') {
      ++i;
    } else if (line[i] == '"') {
      quoted = !quoted;
    } else if (!quoted && line[i] == '}') {
      return i;
    }
  }
  return std::string::npos;
}

// Calls `use` with each sample line whose value is finite (a NaN loss: nothing to report).
template <typename Use>
void for_each_sample(const std::string& exposition, Use use) {
  std::istringstream lines(exposition);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#') continue;
    const auto name_end = line.find_first_of("{ ");
    if (name_end == std::string::npos || name_end == 0) continue;
    const bool labelled = line[name_end] == '{';
    auto value_start = labelled ? labels_end_at(line, name_end + 1) : name_end;
    if (value_start == std::string::npos) continue;
    const auto labels_end = value_start;
    value_start = line.find_first_not_of(' ', value_start + (labelled ? 1 : 0));
    if (value_start == std::string::npos) continue;
    const char* begin = line.c_str() + value_start;
    char* end = nullptr;
    const double value = std::strtod(begin, &end);
    if (end == begin || !std::isfinite(value)) continue;
    use(SampleLine{line.substr(0, name_end),
                   labelled ? line.substr(name_end + 1, labels_end - name_end - 1) : "", value});
  }
}

// The value of `label` in a series' labels (`a="x",b="y"`), unescaped (\\, \", \n), or nullopt.
std::optional<std::string> label_value(const std::string& labels, const std::string& label) {
  const auto key = label + "=\"";
  size_t at = 0;
  while (at < labels.size()) {
    const bool found = labels.compare(at, key.size(), key) == 0;
    // To the end of this label's value: its closing quote, escapes skipped.
    size_t i = labels.find('"', at);
    if (i == std::string::npos) return std::nullopt;
    std::string value;
    for (++i; i < labels.size() && labels[i] != '"'; ++i) {
      if (labels[i] == '\\' && i + 1 < labels.size()) {
        ++i;
        value += labels[i] == 'n' ? '\n' : labels[i];
      } else {
        value += labels[i];
      }
    }
    if (i >= labels.size()) return std::nullopt;
    if (found) return value;
    at = labels.find(',', i);
    if (at == std::string::npos) return std::nullopt;
    ++at;
  }
  return std::nullopt;
}

}  // namespace

std::optional<double> sample(const MetricSamples& samples, const std::string& name) {
  const auto found = samples.find(name);
  if (found == samples.end()) return std::nullopt;
  return found->second;
}

MetricSamples parse_metric_samples(const std::string& exposition) {
  MetricSamples samples;
  for_each_sample(exposition, [&](const SampleLine& sample) {
    samples.emplace(sample.name, sample.value);  // the first sample wins
  });
  return samples;
}

std::map<std::string, MetricSamples> parse_samples_by_label(const std::string& exposition,
                                                            const std::string& label) {
  std::map<std::string, MetricSamples> by_value;
  for_each_sample(exposition, [&](const SampleLine& sample) {
    if (const auto value = label_value(sample.labels, label)) {
      by_value[*value].emplace(sample.name, sample.value);
    }
  });
  return by_value;
}

std::optional<json> job_progress(const std::vector<PodMetrics>& pods, const JobPods& job,
                                 const std::string& now, const json& previous) {
  auto world = world_of(pods);
  if (!world) world = ps_world_of(find(pods, Role::kPs, 0));
  const auto* chief = find(pods, job.has_master ? Role::kMaster : Role::kWorker, 0);
  // An elastic job trains on without worker 0 (lost, between rounds): then the first of the world.
  if (chief == nullptr && !job.has_master && world) {
    chief = find(pods, Role::kWorker, world->at("workers").at(0).get<int>());
  }
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
  json checkpoint = json::object();
  if (const auto saved = sample(chief, metric::kCheckpointSavedStep); saved && *saved >= 0) {
    checkpoint["savedStep"] = std::llround(*saved);
  }
  if (const auto since = sample(chief, metric::kStoreUnreachableSince); since && *since > 0) {
    checkpoint["storeUnreachableSince"] = format_time(
        Clock::time_point(std::chrono::seconds(static_cast<int64_t>(std::floor(*since)))));
  }
  if (!checkpoint.empty()) progress["checkpoint"] = std::move(checkpoint);
  if (world) {
    progress["world"] = *world;
  } else if (previous.contains("world")) {
    progress["world"] = previous["world"];
  }
  if (auto trainers = trainers_of(find(pods, Role::kPs, 0))) {
    progress["trainers"] = std::move(*trainers);
  } else if (previous.contains("trainers")) {
    progress["trainers"] = previous["trainers"];
  }
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
  if (succeeded) {
    last["progressPercentage"] = 100;
    // The chief succeeds only once its last checkpoint (and the done marker after it) is in the
    // store: the store answered, whatever the last scrape, perhaps during an outage, said.
    auto checkpoint = last.value("checkpoint", json::object());
    checkpoint.erase("storeUnreachableSince");
    if (const auto saved = chief.find(key::kSavedStep);
        saved != chief.end() && saved->is_number_integer()) {
      checkpoint["savedStep"] = *saved;
    }
    if (checkpoint.empty()) {
      last.erase("checkpoint");
    } else {
      last["checkpoint"] = std::move(checkpoint);
    }
  }
  last["updatedAt"] = now;
  return last;
}

}  // namespace cifar::op
