// The run's last words for whoever started it (contract/termination.h): on Kubernetes the file is
// the container's termination log, which the kubelet puts into the pod's status, where the operator
// reads a finished job's final figures and a failed pod's reason. Best effort: a file that cannot
// be written is logged and the exit goes on.
#pragma once

#include <string>

#include "train/evaluator.h"
#include "train/result.h"

namespace cifar::train {

// Each does nothing for an empty path.
void write_termination_log(const std::string& path, const TrainResult& result);
void write_termination_log(const std::string& path, const EvaluatorResult& result);
void write_termination_error(const std::string& path, const std::string& error);

}  // namespace cifar::train
