// The test tools built from their Go modules and cached (deploy/tools/build.sh).
#pragma once

#include <filesystem>
#include <string>

namespace cifar::testing {

// The directory of `tool`'s binaries: helm, prometheus, seaweedfs, ... (deploy/tools/build.sh
// prints it last; instant once built). Throws with the script's output if it fails.
std::filesystem::path tool_dir(const std::string& tool);

}  // namespace cifar::testing
