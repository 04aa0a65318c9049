// The CifarTrainJob resource as the tests address it, spelled out from the CRD
// (deploy/crds/cifartrain.io_cifartrainjobs.yaml) rather than taken from the operator's code, and
// its pods, by the label the contract gives them.
#pragma once

#include <string>

#include "contract/labels.h"
#include "kube/client.h"

namespace cifar::testing {

inline kube::ResourcePath cifartrainjobs(const std::string& ns) {
  return {"cifartrain.io", "v1alpha1", "cifartrainjobs", ns, "", ""};
}

// Lists the objects of job `name`: those with its job-name label.
inline kube::ListOptions labelled_with_job(const std::string& name) {
  return {std::string(contract::label::kJobName) + "=" + name, "", ""};
}

}  // namespace cifar::testing
