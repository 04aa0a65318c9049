// A JSON merge patch (RFC 7386, application/merge-patch+json) that sets an object's top-level
// fields to `desired`: every field of `desired`, and null for each field of `current` that
// `desired` lacks, since a merge patch removes a field sent as null and keeps one not sent.
// Nested objects are merged by the server, not replaced.
#pragma once

#include <nlohmann/json.hpp>

namespace cifar::op {

inline nlohmann::json replacing_merge_patch(const nlohmann::json& current,
                                            const nlohmann::json& desired) {
  auto patch = desired;
  for (const auto& [field, value] : current.items()) {
    if (!desired.contains(field)) patch[field] = nullptr;
  }
  return patch;
}

}  // namespace cifar::op
