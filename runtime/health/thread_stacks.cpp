#include "health/thread_stacks.h"

#define UNW_LOCAL_ONLY
#include <cxxabi.h>
#include <elfutils/libdwfl.h>
#include <libunwind.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace cifar::health {

namespace {

constexpr int kMaxFrames = 64;
constexpr auto kAnswerWithin = std::chrono::milliseconds(500);

pid_t this_thread_id() { return static_cast<pid_t>(::syscall(SYS_gettid)); }

// The one request in flight (requests are serialised by g_capture): which thread is asked (0:
// none; kClaimed: the asked thread is writing its frames), and where it writes them. The handler
// touches nothing else.
constexpr pid_t kClaimed = -1;
std::atomic<pid_t> g_asked{0};
std::array<uintptr_t, kMaxFrames> g_frames{};
std::atomic<int> g_frame_count{-1};
std::mutex g_capture;

static_assert(std::atomic<pid_t>::is_always_lock_free, "the handler's atomics must be lock-free");

// A real-time signal nothing here uses (glibc keeps the ones below SIGRTMIN; none of the
// libraries linked take real-time signals), queued, never merged with another kind.
int stack_signal() { return SIGRTMIN + 5; }

// The return addresses from the cursor's frame outwards, into `frames`; how many. Signal-safe.
int walk(unw_cursor_t& cursor, std::array<uintptr_t, kMaxFrames>& frames) {
  int count = 0;
  do {
    unw_word_t ip = 0;
    if (unw_get_reg(&cursor, UNW_REG_IP, &ip) != 0 || ip == 0) break;
    frames[static_cast<size_t>(count++)] = ip;
  } while (count < kMaxFrames && unw_step(&cursor) > 0);
  return count;
}

// Walks from the interrupted context, so the handler's own frames are not in the stack. Only
// async-signal-safe work: libunwind's local unwinding without its global cache (see install).
void on_stack_signal(int /*signal*/, siginfo_t* /*info*/, void* context) {
  const int saved_errno = errno;
  // Claimed, so that a thread answering as its request times out cannot write into the next
  // thread's: the caller either withdraws the request first or waits for the walk to end.
  pid_t asked = this_thread_id();
  if (g_asked.compare_exchange_strong(asked, kClaimed, std::memory_order_acq_rel)) {
    unw_cursor_t cursor;
    const bool ready =
        unw_init_local2(&cursor, static_cast<unw_context_t*>(context), UNW_INIT_SIGNAL_FRAME) == 0;
    g_frame_count.store(ready ? walk(cursor, g_frames) : 0, std::memory_order_release);
  }
  errno = saved_errno;
}

// Whether the handler is in place: without it the signal's default action would end the process.
bool install_handler_once() {
  static std::once_flag once;
  static bool installed = false;
  std::call_once(once, [] {
    // The global cache takes a lock; with a per-thread one, local unwinding is what libunwind(3)
    // calls signal-safe.
    unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
    struct sigaction action {};
    action.sa_sigaction = on_stack_signal;
    action.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&action.sa_mask);
    installed = sigaction(stack_signal(), &action, nullptr) == 0;
  });
  return installed;
}

// The calling thread's stack from its caller outwards (this function's own frame left out).
std::vector<uintptr_t> own_frames() {
  unw_context_t context;
  unw_cursor_t cursor;
  if (unw_getcontext(&context) != 0 || unw_init_local(&cursor, &context) != 0 ||
      unw_step(&cursor) <= 0) {
    return {};
  }
  std::array<uintptr_t, kMaxFrames> frames{};
  const int count = walk(cursor, frames);
  return {frames.begin(), frames.begin() + count};
}

std::optional<std::vector<uintptr_t>> frames_of(pid_t thread) {
  g_frame_count.store(-1, std::memory_order_relaxed);
  g_asked.store(thread, std::memory_order_release);
  std::optional<std::vector<uintptr_t>> frames;
  if (::syscall(SYS_tgkill, ::getpid(), thread, stack_signal()) == 0) {
    const auto deadline = std::chrono::steady_clock::now() + kAnswerWithin;
    while (g_frame_count.load(std::memory_order_acquire) < 0 &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  // Withdrawn unless the thread claimed it: a late answer (signals blocked until now) then finds
  // no request. Claimed: its walk is under way and ends soon.
  pid_t unanswered = thread;
  if (!g_asked.compare_exchange_strong(unanswered, 0, std::memory_order_acq_rel)) {
    while (g_frame_count.load(std::memory_order_acquire) < 0) std::this_thread::yield();
    g_asked.store(0, std::memory_order_release);
  }
  const int count = g_frame_count.load(std::memory_order_acquire);
  if (count >= 0) frames.emplace(g_frames.begin(), g_frames.begin() + count);
  return frames;
}

// The names of the system calls a stalled thread is most likely in; others by number.
std::string syscall_name(long number) {
  switch (number) {
    case SYS_read:
      return "read";
    case SYS_pread64:
      return "pread64";
    case SYS_readv:
      return "readv";
    case SYS_write:
      return "write";
    case SYS_pwrite64:
      return "pwrite64";
    case SYS_openat:
      return "openat";
    case SYS_close:
      return "close";
    case SYS_fsync:
      return "fsync";
    case SYS_newfstatat:
      return "newfstatat";
    case SYS_statx:
      return "statx";
    case SYS_futex:
      return "futex";
    case SYS_ppoll:
      return "ppoll";
    case SYS_epoll_pwait:
      return "epoll_pwait";
    case SYS_connect:
      return "connect";
    case SYS_recvfrom:
      return "recvfrom";
    case SYS_sendto:
      return "sendto";
    case SYS_nanosleep:
      return "nanosleep";
#ifdef SYS_poll
    case SYS_poll:
      return "poll";
#endif
#ifdef SYS_epoll_wait
    case SYS_epoll_wait:
      return "epoll_wait";
#endif
    default:
      return "system call " + std::to_string(number);
  }
}

std::string in_kernel(pid_t thread) {
  const auto task = "/proc/self/task/" + std::to_string(thread);
  std::ifstream syscall_file(task + "/syscall");
  long number = -1;
  if (!(syscall_file >> number) || number < 0) return "";  // "running", or not in a call
  std::ifstream wchan_file(task + "/wchan");
  std::string wchan;
  std::getline(wchan_file, wchan);
  auto where = syscall_name(number);
  if (!wchan.empty() && wchan != "0") where += ", waiting in " + wchan;
  return where;
}

std::string thread_name(pid_t thread) {
  std::ifstream comm("/proc/self/task/" + std::to_string(thread) + "/comm");
  std::string name;
  std::getline(comm, name);
  return name;
}

std::string demangled(const char* name) {
  int status = 0;
  const std::unique_ptr<char, decltype(&std::free)> out(
      abi::__cxa_demangle(name, nullptr, nullptr, &status), &std::free);
  return status == 0 && out ? out.get() : name;
}

int no_debuginfo(Dwfl_Module* /*module*/, void** /*user*/, const char* /*name*/,
                 Dwarf_Addr /*base*/, const char* /*file*/, const char* /*debuglink*/,
                 GElf_Word /*crc*/, char** /*debuginfo_file*/) {
  return -1;
}

// Names addresses with libdw, from this process's maps (and the modules' symbol tables and
// DWARF, read from their files).
class Symbolizer {
 public:
  Symbolizer() : callbacks_(), dwfl_(nullptr, &dwfl_end) {
    callbacks_.find_elf = dwfl_linux_proc_find_elf;
    // Separate debug information from this machine's disk only: with DEBUGINFOD_URLS set, the
    // standard search would ask a debuginfod server, and a report must not wait on the network.
    callbacks_.find_debuginfo =
        std::getenv("DEBUGINFOD_URLS") == nullptr ? dwfl_standard_find_debuginfo : no_debuginfo;
    dwfl_.reset(dwfl_begin(&callbacks_));
    if (!dwfl_) return;
    dwfl_report_begin(dwfl_.get());
    const bool reported = dwfl_linux_proc_report(dwfl_.get(), ::getpid()) == 0;
    dwfl_report_end(dwfl_.get(), nullptr, nullptr);
    if (!reported) dwfl_.reset();
  }

  // `innermost`: the interrupted instruction itself; other frames hold return addresses, which
  // may belong to the next line (or function), so they are looked up one byte before.
  [[nodiscard]] Frame name(uintptr_t address, bool innermost) const {
    Frame frame;
    frame.address = address;
    if (!dwfl_) return frame;
    const Dwarf_Addr at = innermost ? address : address - 1;
    Dwfl_Module* module = dwfl_addrmodule(dwfl_.get(), at);
    if (module == nullptr) return frame;
    // A module reported from /proc is named by its file.
    const char* file =
        dwfl_module_info(module, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr);
    if (file != nullptr) frame.module = std::filesystem::path(file).filename().string();
    if (const char* symbol = dwfl_module_addrname(module, at)) frame.function = demangled(symbol);
    if (Dwfl_Line* line = dwfl_module_getsrc(module, at)) {
      int number = 0;
      const char* source = dwfl_lineinfo(line, nullptr, &number, nullptr, nullptr, nullptr);
      if (source != nullptr) {
        frame.source =
            std::filesystem::path(source).filename().string() + ":" + std::to_string(number);
      }
    }
    return frame;
  }

 private:
  Dwfl_Callbacks callbacks_;
  std::unique_ptr<Dwfl, decltype(&dwfl_end)> dwfl_;
};

// The process's threads, from /proc.
std::vector<pid_t> thread_ids() {
  std::vector<pid_t> ids;
  std::error_code error;
  for (std::filesystem::directory_iterator it("/proc/self/task", error), end; !error && it != end;
       it.increment(error)) {
    const auto name = it->path().filename().string();
    pid_t id = 0;
    if (std::from_chars(name.data(), name.data() + name.size(), id).ec == std::errc()) {
      ids.push_back(id);
    }
  }
  return ids;
}

}  // namespace

std::vector<ThreadStack> thread_stacks() {
  const bool can_ask = install_handler_once();
  const auto self = this_thread_id();
  std::vector<std::pair<ThreadStack, std::vector<uintptr_t>>> raw;
  {
    const std::lock_guard lock(g_capture);
    raw.push_back({{self, thread_name(self), true, {}, ""}, own_frames()});
    for (const auto thread : thread_ids()) {
      if (thread == self) continue;
      ThreadStack stack{thread, thread_name(thread), false, {}, ""};
      auto frames = can_ask ? frames_of(thread) : std::nullopt;
      stack.captured = frames.has_value();
      if (!stack.captured) stack.in_kernel = in_kernel(thread);
      raw.emplace_back(std::move(stack), frames.value_or(std::vector<uintptr_t>{}));
    }
  }
  const Symbolizer symbolizer;
  std::vector<ThreadStack> stacks;
  for (auto& [stack, frames] : raw) {
    for (size_t i = 0; i < frames.size(); ++i) {
      // The caller's own walk starts in a call (a return address) too.
      stack.frames.push_back(symbolizer.name(frames[i], i == 0 && stack.thread != self));
    }
    stacks.push_back(std::move(stack));
  }
  return stacks;
}

}  // namespace cifar::health
