#include "tests/support/tools.h"

#include <stdexcept>

#include "tests/support/process.h"

namespace cifar::testing {

std::filesystem::path tool_dir(const std::string& tool) {
  const auto built = run_process(
      {(std::filesystem::path(CIFAR_SOURCE_DIR) / "deploy/tools/build.sh").string(), tool});
  if (built.exit_code != 0) {
    throw std::runtime_error("deploy/tools/build.sh " + tool + ": " + built.output);
  }
  auto out = built.output;
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out.substr(out.find_last_of('\n') + 1);
}

}  // namespace cifar::testing
