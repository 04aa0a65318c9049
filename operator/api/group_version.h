// The CifarTrainJob's identity in the API (deploy/crds/cifartrain.io_cifartrainjobs.yaml): its
// group, version, kind and resource. The generic client (kube/) knows none of them.
#pragma once

#include <string_view>

namespace cifar::op {

inline constexpr std::string_view kGroup = "cifartrain.io";
inline constexpr std::string_view kVersion = "v1alpha1";
inline constexpr std::string_view kApiVersion = "cifartrain.io/v1alpha1";  // group/version
inline constexpr std::string_view kKind = "CifarTrainJob";
inline constexpr std::string_view kResource = "cifartrainjobs";  // the plural, in URL paths

}  // namespace cifar::op
