// Who controls an object: its ownerReference with `controller: true`. A controller acts only on
// the objects it controls, never on one that merely has the right name or labels (an orphan of an
// earlier owner of the same name, or a user's own object).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace cifar::op {

bool controlled_by(const nlohmann::json& object, const std::string& uid);
// "CifarTrainJob j (uid 1234...)", or "no controller" for an orphan.
std::string describe_controller(const nlohmann::json& object);

}  // namespace cifar::op
