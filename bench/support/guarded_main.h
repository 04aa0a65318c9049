// A benchmark's main: a failure said on one line with the benchmark's name (exit 1), not an
// uncaught exception's abort.
#pragma once

#include <cstdio>
#include <exception>

namespace cifar::bench {

template <typename Run>
int guarded_main(const char* name, Run&& run) noexcept {
  try {
    return run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", name, e.what());
    return 1;
  }
}

}  // namespace cifar::bench
