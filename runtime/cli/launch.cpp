#include "cli/launch.h"

#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "cli/stop_signal.h"
#include "contract/env.h"
#include "contract/flags.h"
#include "contract/ports.h"

namespace cifar::cli {
namespace {

// Exit code of a waited-for child as a shell reports it (128 + signal when killed).
int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

pid_t start_rank(const std::vector<std::string>& args, int rank, int ranks,
                 const std::string& master_addr, int master_port) {
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid > 0) return pid;
  namespace env = contract::env;
  ::setenv(env::kMasterAddr, master_addr.c_str(), 1);
  ::setenv(env::kMasterPort, std::to_string(master_port).c_str(), 1);
  ::setenv(env::kWorldSize, std::to_string(ranks).c_str(), 1);
  ::setenv(env::kRank, std::to_string(rank).c_str(), 1);
  ::setenv(env::kLocalRank, std::to_string(rank).c_str(), 1);
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));  // NOLINT: execv's API
  argv.push_back(nullptr);
  ::execv("/proc/self/exe", argv.data());
  std::cerr << "cifar-train launch: cannot start rank " << rank << "\n";
  ::_exit(127);
}

}  // namespace

int launch_local_ranks(int argc, const char* const argv[]) {
  CLI::App app{
      "Runs N ranks of an all-reduce job on this machine; the remaining flags go to "
      "every rank (--strategy allreduce is implied)",
      "cifar-train launch"};
  int ranks = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = contract::kC10dStorePort.number;
  app.add_option("-n,--nproc", ranks, "Ranks to run")->required()->check(CLI::Range(1, 1024));
  app.add_option("--master-addr", master_addr, "Host of rank 0's c10d store")
      ->capture_default_str();
  app.add_option("--master-port", master_port, "Port of rank 0's c10d store")
      ->check(CLI::Range(1, 65535))
      ->capture_default_str();
  app.prefix_command();  // everything after launch's own flags is for the ranks
  try {
    app.parse(argc - 1, argv + 1);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  std::vector<std::string> args{"cifar-train"};
  const auto rest = app.remaining();
  if (std::any_of(rest.begin(), rest.end(),
                  [](const std::string& arg) { return arg.rfind("--min-ranks", 0) == 0; })) {
    std::cerr << "cifar-train launch: an elastic job (--min-ranks) is not launched here yet: run "
                 "'cifar-train rendezvous-store --port P' and each rank with MASTER_ADDR, "
                 "MASTER_PORT=P, WORLD_SIZE (the most ranks) and RANK set\n";
    return 2;
  }
  args.insert(args.end(), rest.begin(), rest.end());
  const auto strategy = contract::flag::kStrategy.name;
  if (std::find(rest.begin(), rest.end(), strategy) == rest.end()) {
    args.emplace_back(strategy);
    args.emplace_back("allreduce");
  }

  catch_stop_signals();
  std::vector<pid_t> children;
  children.reserve(static_cast<size_t>(ranks));
  for (int rank = 0; rank < ranks; ++rank) {
    children.push_back(start_rank(args, rank, ranks, master_addr, master_port));
  }
  int result = 0;
  size_t running = children.size();
  bool stopping = false;
  auto stop_all = [&](int signal) {
    for (const pid_t child : children) {
      if (child > 0) ::kill(child, signal);
    }
  };
  while (running > 0) {
    int status = 0;
    const pid_t done = ::waitpid(-1, &status, WNOHANG);
    if (done > 0) {
      auto it = std::find(children.begin(), children.end(), done);
      if (it == children.end()) continue;
      const int rank = static_cast<int>(it - children.begin());
      *it = -1;
      --running;
      const int code = exit_code_of(status);
      if (code != 0 && result == 0) {
        result = code;
        std::cerr << "cifar-train launch: rank " << rank << " exited with " << code
                  << "; stopping the other ranks\n";
        stopping = true;
        stop_all(SIGTERM);
      }
      continue;
    }
    if (g_stop_signal != 0 && !stopping) {
      stopping = true;
      result = 128 + g_stop_signal;
      stop_all(SIGTERM);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return result;
}

}  // namespace cifar::cli
