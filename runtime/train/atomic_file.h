// Files that readers polling for them must never see half-written.
#pragma once

#include <filesystem>
#include <functional>

namespace cifar::train {

// Replaces `path` atomically: `write` fills a temp file beside it, which is then renamed.
void replace_atomically(const std::filesystem::path& path,
                        const std::function<void(const std::filesystem::path&)>& write);

}  // namespace cifar::train
