// What /proc says of another process: its CPU seconds and its peak resident memory. For the
// operator benchmarks, which measure an operator process they started.
#pragma once

#include <sys/types.h>

namespace cifar::bench {

double cpu_seconds(pid_t pid);   // utime + stime
double peak_rss_mib(pid_t pid);  // VmHWM

}  // namespace cifar::bench
