#include "train/atomic_file.h"

namespace cifar::train {

void replace_atomically(const std::filesystem::path& path,
                        const std::function<void(const std::filesystem::path&)>& write) {
  const auto temp = path.parent_path() / ("." + path.filename().string() + ".tmp");
  write(temp);
  std::filesystem::rename(temp, path);
}

}  // namespace cifar::train
