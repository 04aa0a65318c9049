// A JSON merge patch (RFC 7386, application/merge-patch+json) that makes an object equal to
// `desired`: every field of `desired`, and null for each field of `current` that `desired` lacks
// (a merge patch removes a field sent as null and keeps one not sent), at every depth: where both
// hold an object under a field, the patch for it is made the same way (the server merges nested
// objects, so a key dropped from one, such as status.progress.estimatedRemainingSeconds, must be
// sent as null too). Arrays are replaced whole, as merge patches do.
#pragma once

#include <nlohmann/json.hpp>

namespace cifar::op {

inline nlohmann::json replacing_merge_patch(const nlohmann::json& current,
                                            const nlohmann::json& desired) {
  if (!current.is_object() || !desired.is_object()) return desired;
  auto patch = desired;
  for (const auto& [field, value] : current.items()) {
    const auto wanted = desired.find(field);
    if (wanted == desired.end()) {
      patch[field] = nullptr;
    } else if (value.is_object() && wanted->is_object()) {
      patch[field] = replacing_merge_patch(value, *wanted);
    }
  }
  return patch;
}

}  // namespace cifar::op
