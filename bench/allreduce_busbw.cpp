// All-reduce bus bandwidth of c10d's Gloo backend between rank processes on one machine, against
// raw TCP loopback measured in the same run. busbw follows nccl-tests: algbw = bytes / time,
// busbw = algbw * 2 (n - 1) / n, the rate each rank's link must sustain, comparable to a link's
// bandwidth whatever n is. For two ranks a ring sends and receives at once, so the reference is
// given both for one TCP stream and for two streams in opposite directions at once.
//
// Usage: bench-allreduce-busbw [ranks, default 2]
// (The ranks are this binary again: bench-allreduce-busbw --rank R --world N --port P.)
#include <fmt/core.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <torch/torch.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <map>
#include <sstream>
#include <string>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <vector>

#include "bench/support/guarded_main.h"
#include "bench/support/loopback_tcp.h"
#include "distributed/allreduce/rendezvous.h"
#include "train/host_memory.h"

namespace {

const std::vector<int64_t> kSizes = {int64_t{256} << 10, int64_t{1} << 20, int64_t{4} << 20,
                                     int64_t{16} << 20, int64_t{64} << 20};

// One rank: all-reduces float tensors of each size; rank 0 prints "bytes seconds_per_op" lines.
int run_rank(int rank, int world, int port) {
  cifar::allreduce::Options options;
  options.rank = rank;
  options.world_size = world;
  options.master_port = port;
  options.timeout_seconds = 120;
  cifar::allreduce::Rendezvous rendezvous(options, cifar::allreduce::Backend::kGloo);
  auto group = rendezvous.form([] {});
  for (const auto bytes : kSizes) {
    std::vector<torch::Tensor> buffer{torch::ones({bytes / 4})};
    const int iterations = static_cast<int>(std::max<int64_t>(10, (int64_t{1} << 30) / bytes));
    for (int i = 0; i < 3; ++i) group->allreduce(buffer)->wait();  // connections, caches
    group->barrier()->wait();
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < iterations; ++i) group->allreduce(buffer)->wait();
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (rank == 0) fmt::print("{} {}\n", bytes, seconds / iterations);
  }
  std::fflush(stdout);
  return 0;
}

// Starts the ranks; returns rank 0's seconds per all-reduce by size.
std::map<int64_t, double> run_ranks(int world) {
  const int port = 29500 + static_cast<int>(::getpid() % 20000);
  int pipe_fds[2];
  if (::pipe(pipe_fds) != 0) throw std::runtime_error("pipe failed");
  std::vector<pid_t> children;
  for (int r = 0; r < world; ++r) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      if (r == 0) ::dup2(pipe_fds[1], STDOUT_FILENO);
      ::close(pipe_fds[0]);
      ::close(pipe_fds[1]);
      const auto rank = std::to_string(r);
      const auto size = std::to_string(world);
      const auto port_text = std::to_string(port);
      ::execl("/proc/self/exe", "bench-allreduce-busbw", "--rank", rank.c_str(), "--world",
              size.c_str(), "--port", port_text.c_str(), nullptr);
      ::_exit(127);
    }
    children.push_back(pid);
  }
  ::close(pipe_fds[1]);
  std::string from_rank0;
  std::array<char, 4096> chunk{};
  for (ssize_t n = 0; (n = ::read(pipe_fds[0], chunk.data(), chunk.size())) > 0;) {
    from_rank0.append(chunk.data(), static_cast<size_t>(n));
  }
  ::close(pipe_fds[0]);
  std::map<int64_t, double> seconds;
  std::istringstream lines(from_rank0);
  int64_t bytes = 0;
  double per_op = 0;
  while (lines >> bytes >> per_op) seconds[bytes] = per_op;
  for (const pid_t pid : children) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) throw std::runtime_error("a rank failed");
  }
  return seconds;
}

int run(int argc, char** argv) {
  spdlog::set_level(spdlog::level::warn);
  cifar::train::keep_freed_memory_for_reuse();  // as cifar-train does in every process
  torch::set_num_threads(1);
  if (argc == 7 && std::string(argv[1]) == "--rank") {
    return run_rank(std::stoi(argv[2]), std::stoi(argv[4]), std::stoi(argv[6]));
  }
  const int world = argc > 1 ? std::stoi(argv[1]) : 2;
  auto tcp = [](bool both) {
    return cifar::bench::median_tcp_stream_bandwidth(int64_t{1} << 30, both);
  };
  const double one_before = tcp(false);
  const double both_before = tcp(true);
  const auto seconds = run_ranks(world);
  const double one = (one_before + tcp(false)) / 2;
  const double both = (both_before + tcp(true)) / 2;

  fmt::print(
      "raw TCP loopback: one stream {:.0f} MB/s; two opposite streams at once {:.0f} MB/s "
      "each (medians of 3, mean of before and after)\n\n",
      one / 1e6, both / 1e6);
  fmt::print("c10d Gloo all-reduce (sum, float32), {} rank processes, 1 intra-op thread each:\n\n",
             world);
  fmt::print(
      "| size | time per all-reduce | algbw MB/s | busbw MB/s | busbw / one stream | busbw / "
      "two opposite streams |\n|---:|---:|---:|---:|---:|---:|\n");
  for (const auto& [bytes, per_op] : seconds) {
    const double algbw = static_cast<double>(bytes) / per_op;
    const double busbw = algbw * 2 * (world - 1) / world;
    fmt::print("| {:.2f} MiB | {:.2f} ms | {:.0f} | {:.0f} | {:.0f}% | {:.0f}% |\n",
               static_cast<double>(bytes) / (1 << 20), per_op * 1e3, algbw / 1e6, busbw / 1e6,
               100 * busbw / one, 100 * busbw / both);
  }
  fmt::print("\nCommand: build/bin/bench-allreduce-busbw {}\n", world);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return cifar::bench::guarded_main("bench-allreduce-busbw", [&] { return run(argc, argv); });
}
