#include "cluster/cluster.h"

#include <nlohmann/json.hpp>
#include <stdexcept>

namespace cifar::cluster {
namespace {

// The list of `role`'s addresses (const or not, as `spec` is).
template <typename Spec>
auto& addresses(Spec& spec, Role role) {
  switch (role) {
    case Role::kPs:
      return spec.ps;
    case Role::kMaster:
      return spec.master;
    case Role::kWorker:
      return spec.worker;
    case Role::kEvaluator:
      return spec.evaluator;
  }
  throw std::logic_error("unknown role");
}

void check_address(const std::string& field, const std::string& address) {
  const auto colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size() ||
      address.find_first_not_of("0123456789", colon + 1) != std::string::npos) {
    throw std::invalid_argument("TF_CONFIG: " + field + " = \"" + address + "\" is not host:port");
  }
}

}  // namespace

Role parse_role(const std::string& name) {
  if (const auto role = contract::parse_role(name)) return *role;
  throw std::invalid_argument("unknown role '" + name + "' (ps, master, worker, evaluator)");
}

int Job::trainer_count() const {
  return static_cast<int>(cluster.master.size() + cluster.worker.size());
}

bool Job::is_trainer() const { return role == Role::kMaster || role == Role::kWorker; }

int Job::trainer_rank() const {
  if (role == Role::kMaster) return index;
  if (role == Role::kWorker) return static_cast<int>(cluster.master.size()) + index;
  throw std::logic_error(task_name() + " is not a trainer");
}

bool Job::is_chief() const { return contract::is_chief(role, index, !cluster.master.empty()); }

std::string Job::task_name() const {
  return std::string(role_name(role)) + " " + std::to_string(index);
}

Job parse_tf_config(const std::string& text) {
  nlohmann::json config;
  try {
    config = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(std::string("TF_CONFIG is not valid JSON: ") + e.what());
  }
  if (!config.is_object() || !config.contains("cluster") || !config["cluster"].is_object()) {
    throw std::invalid_argument("TF_CONFIG: missing object \"cluster\"");
  }
  if (!config.contains("task") || !config["task"].is_object()) {
    throw std::invalid_argument("TF_CONFIG: missing object \"task\"");
  }
  Job job;
  for (const auto& [key, value] : config["cluster"].items()) {
    Role role{};
    try {
      role = parse_role(key);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument("TF_CONFIG: cluster." + key + ": " + e.what());
    }
    if (!value.is_array()) {
      throw std::invalid_argument("TF_CONFIG: cluster." + key + " must be a list of host:port");
    }
    auto& list = addresses(job.cluster, role);
    for (size_t i = 0; i < value.size(); ++i) {
      const std::string field = "cluster." + key + "[" + std::to_string(i) + "]";
      if (!value[i].is_string())
        throw std::invalid_argument("TF_CONFIG: " + field + " not a string");
      check_address(field, value[i].get<std::string>());
      list.push_back(value[i].get<std::string>());
    }
  }
  const auto& task = config["task"];
  if (!task.contains("type") || !task["type"].is_string()) {
    throw std::invalid_argument("TF_CONFIG: task.type must be a string");
  }
  try {
    job.role = parse_role(task["type"].get<std::string>());
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string("TF_CONFIG: task.type: ") + e.what());
  }
  job.index = 0;
  if (task.contains("index")) {
    if (!task["index"].is_number_integer() || task["index"].get<int64_t>() < 0) {
      throw std::invalid_argument("TF_CONFIG: task.index must be a non-negative integer");
    }
    job.index = task["index"].get<int>();
  }
  // TensorFlow leaves the evaluator out of the cluster; every other task must be listed.
  const auto& own = addresses(job.cluster, job.role);
  if (job.role != Role::kEvaluator && static_cast<size_t>(job.index) >= own.size()) {
    throw std::invalid_argument("TF_CONFIG: task " + job.task_name() + " is not in cluster." +
                                std::string(role_name(job.role)) + " (" +
                                std::to_string(own.size()) + " entries)");
  }
  if (job.cluster.master.size() > 1) {
    throw std::invalid_argument("TF_CONFIG: cluster.master has " +
                                std::to_string(job.cluster.master.size()) +
                                " entries; a job has at most one master");
  }
  if (job.trainer_count() == 0) {
    throw std::invalid_argument("TF_CONFIG: the cluster has no master and no worker");
  }
  return job;
}

Job local_job(const LocalFlags& f) {
  if (f.ps_count < 0 || f.worker_count < 0) {
    throw std::invalid_argument("--ps-count and --worker-count must not be negative");
  }
  Job job;
  int port = f.start_port;
  auto next = [&] { return f.host + ":" + std::to_string(port++); };
  for (int i = 0; i < f.ps_count; ++i) job.cluster.ps.push_back(next());
  job.cluster.master.push_back(next());
  for (int i = 0; i < f.worker_count; ++i) job.cluster.worker.push_back(next());
  job.cluster.evaluator.push_back(next());
  job.role = parse_role(f.type);
  job.index = job.role == Role::kPs ? f.ps_index : job.role == Role::kWorker ? f.worker_index : 0;
  if (job.role == Role::kPs && (job.index < 0 || job.index >= f.ps_count)) {
    throw std::invalid_argument("--ps-index " + std::to_string(job.index) +
                                " is outside --ps-count " + std::to_string(f.ps_count));
  }
  if (job.role == Role::kWorker && (job.index < 0 || job.index >= f.worker_count)) {
    throw std::invalid_argument("--worker-index " + std::to_string(job.index) +
                                " is outside --worker-count " + std::to_string(f.worker_count));
  }
  if (f.start_port <= 0 || port - 1 > 65535) {
    throw std::invalid_argument("--dist-start-port " + std::to_string(f.start_port) +
                                " leaves no room for the job's ports");
  }
  return job;
}

int local_port_offset(const Job& job) {
  const int ps = static_cast<int>(job.cluster.ps.size());
  const int masters = static_cast<int>(job.cluster.master.size());
  switch (job.role) {
    case Role::kPs:
      return job.index;
    case Role::kMaster:
      return ps + job.index;
    case Role::kWorker:
      return ps + masters + job.index;
    case Role::kEvaluator:
      return ps + masters + static_cast<int>(job.cluster.worker.size());
  }
  return 0;
}

}  // namespace cifar::cluster
