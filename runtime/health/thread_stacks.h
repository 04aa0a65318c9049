// The stack of every thread of this process, symbolised: what a stall report shows. Each thread,
// asked in turn with a real-time signal, walks its own stack (libunwind, from the interrupted
// context) into one static buffer, and does nothing else in the handler, which is safe wherever
// the thread is stopped (in a lock, a syscall, a collective); the caller then names the addresses
// (elfutils' libdw: functions, also static ones, and source lines where there is debug
// information). The handler is SA_RESTART: a blocking read, write, futex or connect goes on
// waiting as before; the calls that are never restarted (poll, epoll_wait, nanosleep: signal(7))
// fail with EINTR, which gRPC, Gloo and this program's own polls retry.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace cifar::health {

struct Frame {
  uintptr_t address = 0;
  std::string function;  // demangled; empty when unknown
  std::string module;    // the file it is in (its base name)
  std::string source;    // "file.cpp:123" when debug information says so
};

struct ThreadStack {
  pid_t thread = 0;
  std::string name;           // /proc's comm
  bool captured = false;      // false: the thread did not answer (signals blocked, exiting)
  std::vector<Frame> frames;  // innermost first
  // Of a thread that did not answer, where the kernel holds it, from /proc: "read, waiting in
  // request_wait_answer" (a system call that waits uninterruptibly runs no signal handler: a read
  // of a filesystem that stopped answering); "" if not in a system call.
  std::string in_kernel;
};

// Every thread of the process; the caller's first, from where it called.
[[nodiscard]] std::vector<ThreadStack> thread_stacks();

}  // namespace cifar::health
