// Where CifarTrainJobs are in the API, as a path for the generic client.
#pragma once

#include <string>

#include "api/group_version.h"
#include "kube/client.h"

namespace cifar::op {

// The CifarTrainJobs of namespace `ns` ("" for every namespace).
inline kube::ResourcePath cifartrainjobs(const std::string& ns = "") {
  return {std::string(kGroup), std::string(kVersion), std::string(kResource), ns, "", ""};
}

}  // namespace cifar::op
