#include "cli/launch.h"

#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cli/stop_signal.h"
#include "contract/env.h"
#include "contract/exit_codes.h"
#include "contract/flags.h"
#include "contract/ports.h"

namespace cifar::cli {
namespace {

using Clock = std::chrono::steady_clock;
using Env = std::vector<std::pair<const char*, std::string>>;

// An elastic job: how long the ranks still running may take to end on their own once one ended
// the job (exit 0: its group finished); then they are asked to stop, as the operator deletes the
// pods left once the chief succeeded: a rank waiting to join a group that finished would wait
// for its rendezvous timeout, and to one of that group, past its last step, a stop is no news.
constexpr auto kFinishGrace = std::chrono::seconds(10);

// Exit code of a waited-for child as a shell reports it (128 + signal when killed).
int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return contract::kExitSignalBase + WTERMSIG(status);
  return contract::kExitFailed;
}

// This binary again with `args` (args[0] its name) and `env` added; what it is, for an error.
pid_t spawn(const std::vector<std::string>& args, const Env& env, const std::string& what) {
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid > 0) return pid;
  for (const auto& [name, value] : env) ::setenv(name, value.c_str(), 1);
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));  // NOLINT: execv's API
  argv.push_back(nullptr);
  ::execv("/proc/self/exe", argv.data());
  std::cerr << "cifar-train launch: cannot start " << what << "\n";
  ::_exit(127);
}

// The value of --min-ranks among the ranks' flags ("--min-ranks N" or "--min-ranks=N"): nullopt
// where it is not given (a fixed job); throws std::invalid_argument where it is no number.
std::optional<int> min_ranks_in(const std::vector<std::string>& args) {
  const std::string flag(contract::flag::kMinRanks.name);
  for (size_t i = 0; i < args.size(); ++i) {
    std::string value;
    if (args[i] == flag && i + 1 < args.size()) {
      value = args[i + 1];
    } else if (args[i].rfind(flag + "=", 0) == 0) {
      value = args[i].substr(flag.size() + 1);
    } else {
      continue;
    }
    try {
      size_t used = 0;
      const int number = std::stoi(value, &used);
      if (used == value.size()) return number;
    } catch (const std::exception&) {  // said below
    }
    throw std::invalid_argument(flag + " " + value + ": not a whole number");
  }
  return std::nullopt;
}

// One rank's place in the job: the process now in it, and how many were started there.
struct Slot {
  pid_t pid = -1;
  int incarnation = 0;
};

class LocalJob {
 public:
  LocalJob(std::vector<std::string> args, int ranks, std::string master_addr, int master_port,
           std::optional<int> min_ranks, int max_restarts)
      : args_(std::move(args)),
        slots_(static_cast<size_t>(ranks)),
        master_addr_(std::move(master_addr)),
        master_port_(master_port),
        min_ranks_(min_ranks),
        restarts_left_(max_restarts) {}

  int run() {
    if (min_ranks_) {
      // An elastic job's ranks meet at a store of their own, which outlives any of them.
      store_ = spawn({"cifar-train", "rendezvous-store", "--port", std::to_string(master_port_)},
                     {}, "the rendezvous store");
    }
    for (size_t slot = 0; slot < slots_.size(); ++slot) start(slot);
    while (running() > 0) {
      int status = 0;
      if (const pid_t done = ::waitpid(-1, &status, WNOHANG); done > 0) {
        ended(done, exit_code_of(status));
        continue;
      }
      if (g_stop_signal != 0 && !stopping_) stop_all(contract::kExitSignalBase + g_stop_signal);
      if (min_ranks_ && finished_at_ && !stopping_ && Clock::now() - *finished_at_ > kFinishGrace) {
        stop_all(contract::kExitOk);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (store_ > 0) {
      ::kill(store_, SIGTERM);
      ::waitpid(store_, nullptr, 0);
    }
    return finished_at_ ? contract::kExitOk : result_;
  }

 private:
  void start(size_t slot) {
    namespace env = contract::env;
    auto& place = slots_[slot];
    place.incarnation += 1;
    const auto rank = std::to_string(slot);
    Env rank_env = {{env::kMasterAddr, master_addr_},
                    {env::kMasterPort, std::to_string(master_port_)},
                    {env::kWorldSize, std::to_string(slots_.size())},
                    {env::kRank, rank},
                    {env::kLocalRank, rank}};
    // An elastic job's ranks are numbered as an operator's pods are: a rank started again
    // outranks the one it replaces (train/fence.h).
    if (min_ranks_) rank_env.emplace_back(env::kIncarnation, std::to_string(place.incarnation));
    place.pid = spawn(args_, rank_env, "rank " + rank);
  }

  [[nodiscard]] size_t running() const {
    return static_cast<size_t>(
        std::count_if(slots_.begin(), slots_.end(), [](const Slot& slot) { return slot.pid > 0; }));
  }

  void ended(pid_t pid, int code) {
    const auto it = std::find_if(slots_.begin(), slots_.end(),
                                 [&](const Slot& slot) { return slot.pid == pid; });
    if (it == slots_.end()) return;  // the store, or a rank already counted
    it->pid = -1;
    const auto slot = static_cast<size_t>(it - slots_.begin());
    if (code == contract::kExitOk) {
      // A rank that finished ends the job: the others of its group finish with it.
      if (!finished_at_) finished_at_ = Clock::now();
      return;
    }
    if (stopping_ || finished_at_ || code == contract::kExitStopped) return;
    if (min_ranks_ && contract::is_retryable_exit(code) && restarts_left_ > 0) {
      --restarts_left_;
      std::cerr << "cifar-train launch: rank " << slot << " exited with " << code
                << "; the others train on, and it starts again (" << restarts_left_
                << " restarts left)\n";
      start(slot);
      return;
    }
    if (min_ranks_ && static_cast<int>(running()) >= *min_ranks_) {
      std::cerr << "cifar-train launch: rank " << slot << " exited with " << code << "; "
                << running() << " ranks train on without it (--min-ranks " << *min_ranks_ << ")\n";
      if (result_ == contract::kExitOk) result_ = code;  // unless the job finishes after all
      return;
    }
    std::cerr << "cifar-train launch: rank " << slot << " exited with " << code
              << "; stopping the other ranks\n";
    stop_all(code);
  }

  void stop_all(int result) {
    stopping_ = true;
    if (result_ == contract::kExitOk) result_ = result;
    for (const auto& slot : slots_) {
      if (slot.pid > 0) ::kill(slot.pid, SIGTERM);
    }
  }

  std::vector<std::string> args_;
  std::vector<Slot> slots_;
  std::string master_addr_;
  int master_port_;
  std::optional<int> min_ranks_;  // set: an elastic job
  int restarts_left_;
  pid_t store_ = -1;
  bool stopping_ = false;
  std::optional<Clock::time_point> finished_at_;  // when the first rank finished the job
  int result_ = contract::kExitOk;                // the first failure's code
};

}  // namespace

int launch_local_ranks(int argc, const char* const argv[]) {
  CLI::App app{
      "Runs N ranks of an all-reduce job on this machine; the remaining flags go to "
      "every rank (--strategy allreduce is implied)",
      "cifar-train launch"};
  int ranks = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = contract::kC10dStorePort.number;
  int max_restarts = 3;
  app.add_option("-n,--nproc", ranks, "Ranks to run (an elastic job's most)")
      ->required()
      ->check(CLI::Range(1, 1024));
  app.add_option("--master-addr", master_addr, "Host of the c10d store")->capture_default_str();
  app.add_option("--master-port", master_port, "Port of the c10d store")
      ->check(CLI::Range(1, 65535))
      ->capture_default_str();
  app.add_option("--max-restarts", max_restarts,
                 "An elastic job (--min-ranks): how many times over the job a rank killed by a "
                 "signal is started again while the others train on")
      ->check(CLI::Range(0, 1000))
      ->capture_default_str();
  app.prefix_command();  // everything after launch's own flags is for the ranks
  try {
    app.parse(argc - 1, argv + 1);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  std::vector<std::string> args{"cifar-train"};
  const auto rest = app.remaining();
  std::optional<int> min_ranks;
  try {
    min_ranks = min_ranks_in(rest);
  } catch (const std::invalid_argument& e) {
    std::cerr << "cifar-train launch: " << e.what() << "\n";
    return contract::kExitUsage;
  }
  args.insert(args.end(), rest.begin(), rest.end());
  const auto strategy = contract::flag::kStrategy.name;
  if (std::find(rest.begin(), rest.end(), strategy) == rest.end()) {
    args.emplace_back(strategy);
    args.emplace_back("allreduce");
  }
  catch_stop_signals();
  return LocalJob(std::move(args), ranks, master_addr, master_port, min_ranks, max_restarts).run();
}

}  // namespace cifar::cli
