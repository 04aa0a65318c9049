#include "framework/owner.h"

namespace cifar::op {

using nlohmann::json;

namespace {

const json* controller_of(const json& object) {
  const auto metadata = object.find("metadata");
  if (metadata == object.end()) return nullptr;
  const auto owners = metadata->find("ownerReferences");
  if (owners == metadata->end() || !owners->is_array()) return nullptr;
  for (const auto& owner : *owners) {
    if (owner.value("controller", false)) return &owner;
  }
  return nullptr;
}

}  // namespace

bool controlled_by(const json& object, const std::string& uid) {
  const auto* owner = controller_of(object);
  return owner != nullptr && owner->value("uid", "") == uid;
}

std::string describe_controller(const json& object) {
  const auto* owner = controller_of(object);
  if (owner == nullptr) return "no controller";
  return owner->value("kind", "?") + " " + owner->value("name", "?") + " (uid " +
         owner->value("uid", "?") + ")";
}

}  // namespace cifar::op
