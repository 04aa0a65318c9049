#include "health/stall_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>

namespace cifar::health {

namespace {

std::string describe(const WaitRecord& wait) {
  return wait.peer.empty() ? wait.what : wait.what + " with " + wait.peer;
}

std::string describe(const Frame& frame) {
  std::string text = frame.function.empty() ? "??" : frame.function;
  if (!frame.source.empty()) text += " at " + frame.source;
  if (!frame.module.empty()) text += " (" + frame.module + ")";
  return text;
}

const ThreadStack* main_thread(const StallFacts& facts) {
  const auto it = std::find_if(facts.stacks.begin(), facts.stacks.end(),
                               [&](const ThreadStack& s) { return s.thread == facts.pid; });
  return it == facts.stacks.end() ? nullptr : &*it;
}

// The innermost frame of ours (namespace cifar): where in this program the thread waits.
const Frame* innermost_of_ours(const ThreadStack& stack) {
  // "cifar::f(...)", or a template's "void cifar::f<T>(...)"; not std::function's handler whose
  // template arguments name a cifar:: lambda.
  const auto it = std::find_if(stack.frames.begin(), stack.frames.end(), [](const Frame& f) {
    const auto name = f.function.substr(0, f.function.find('('));
    return name.rfind("cifar::", 0) == 0 || name.find(" cifar::") != std::string::npos;
  });
  return it == stack.frames.end() ? nullptr : &*it;
}

}  // namespace

std::string format_stall_report(const StallFacts& facts) {
  std::string out = fmt::format(
      "stall report: {} (pid {}) made no progress for {:.1f} s (limit {:.0f} s: {}); {} progress "
      "marks so far, the longest gap between two of them {:.1f} s\n",
      facts.who, facts.pid, facts.progress.seconds_since_progress, facts.limit_seconds,
      facts.limit_rule, facts.progress.progress_marks, facts.progress.longest_interval);
  if (facts.waits.in_flight.empty()) {
    out += "waiting on: nothing this process tracks (no PS call, collective, read or save)\n";
  } else {
    out += "waiting on (oldest first):\n";
    for (const auto& wait : facts.waits.in_flight) {
      out += fmt::format("  {}, for {:.1f} s (thread {})\n", describe(wait), wait.seconds,
                         wait.thread);
    }
  }
  if (!facts.waits.finished.empty()) {
    out += "last finished (newest last):\n";
    for (const auto& wait : facts.waits.finished) {
      out += fmt::format("  {}: took {:.3f} s, ended {:.1f} s ago\n", describe(wait), wait.seconds,
                         wait.ended_ago);
    }
  }
  for (const auto& stack : facts.stacks) {
    std::string unanswered;
    if (!stack.captured) {
      unanswered = stack.in_kernel.empty()
                       ? ": did not answer (signals blocked?)"
                       : ": did not answer, held in the kernel: " + stack.in_kernel;
    }
    out += fmt::format("thread {} \"{}\"{}{}\n", stack.thread, stack.name,
                       stack.thread == facts.pid ? " (main)" : "", unanswered);
    for (size_t i = 0; i < stack.frames.size(); ++i) {
      out += fmt::format("  #{:<2} {:#014x} {}\n", i, stack.frames[i].address,
                         describe(stack.frames[i]));
    }
  }
  return out;
}

std::string summarize_stall(const StallFacts& facts) {
  std::string out = fmt::format("stalled: no progress for {:.0f} s (limit {:.0f} s)",
                                facts.progress.seconds_since_progress, facts.limit_seconds);
  if (!facts.waits.in_flight.empty()) {
    const auto& oldest = facts.waits.in_flight.front();
    out += fmt::format("; waiting on {} for {:.0f} s", describe(oldest), oldest.seconds);
  }
  if (const auto* main = main_thread(facts); main != nullptr && !main->frames.empty()) {
    const auto* ours = innermost_of_ours(*main);
    out += "; main thread in " + (ours != nullptr ? ours->function : std::string("??"));
    if (ours != &main->frames.front())
      out += " (innermost: " + describe(main->frames.front()) + ")";
  } else if (main != nullptr && !main->in_kernel.empty()) {
    out += "; main thread held in the kernel: " + main->in_kernel;
  }
  return out;
}

}  // namespace cifar::health
