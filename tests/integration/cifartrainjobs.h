// The CifarTrainJob resource as the tests address it, spelled out from the CRD
// (deploy/crds/cifartrain.io_cifartrainjobs.yaml) rather than taken from the operator's code.
#pragma once

#include <string>

#include "kube/client.h"

namespace cifar::testing {

inline kube::ResourcePath cifartrainjobs(const std::string& ns) {
  return {"cifartrain.io", "v1alpha1", "cifartrainjobs", ns, "", ""};
}

}  // namespace cifar::testing
