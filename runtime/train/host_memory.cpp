#include "train/host_memory.h"

#include <malloc.h>

namespace cifar::train {

void keep_freed_memory_for_reuse() {
  constexpr int kMmapThreshold = 256 << 20;  // larger blocks still get their own mapping
  constexpr int kTrimThreshold = 1 << 30;    // free heap kept before trimming back to the kernel
  mallopt(M_MMAP_THRESHOLD, kMmapThreshold);
  mallopt(M_TRIM_THRESHOLD, kTrimThreshold);
}

}  // namespace cifar::train
