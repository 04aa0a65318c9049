// Push-and-pull throughput of the parameter server over gRPC on loopback, for the alexnet and
// resnet20 parameter sets, side by side with two raw TCP loopback references measured in the same
// run: one stream's bandwidth, and raw TCP doing the same round trips (per shard connection: send
// the shard's gradient bytes, receive as many bytes back; no protocol, no update). A round trip
// pushes every gradient piece and pulls every parameter piece back: its effective bandwidth is
// (pushed + pulled bytes) / time, both directions being sequential.
//
// With `tls` as the third argument it measures instead what the PS channel's mutual TLS costs:
// each parameter set (one PS, its default stripes, fp32) in plaintext and over TLS with a job's
// credentials, alternately, three times each, the median of each.
//
// Usage: bench-ps-push-pull [round trips per case, default 40] [only this parameter set | all]
//                           [tls]
#include <fmt/core.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "bench/support/loopback_tcp.h"
#include "distributed/ps/client.h"
#include "distributed/ps/ps_checkpoint.h"
#include "distributed/ps/server.h"
#include "distributed/ps/tensor_codec.h"
#include "models/model.h"
#include "security/certificates.h"
#include "train/host_memory.h"

namespace {

using Clock = std::chrono::steady_clock;
using cifar::bench::receive_all;
using cifar::bench::send_all;
using cifar::ps::ParameterInfo;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// CPU seconds of every thread of this process (trainer, shards and gRPC's threads) so far.
double process_cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec * 1e-6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

// Bytes per second of raw TCP doing a PS exchange's round trips: one connection per shard, all
// shards at once; each round sends the shard's bytes and waits for as many bytes back (an echo
// server that does nothing else). The most any push-and-pull protocol could reach here.
double tcp_round_trip_bandwidth(const std::vector<int64_t>& bytes_per_shard, int rounds) {
  const cifar::bench::Listener listener(static_cast<int>(bytes_per_shard.size()));
  std::vector<std::thread> echoes;
  std::vector<int> clients;
  for (const auto bytes : bytes_per_shard) {
    clients.push_back(listener.connect());
    echoes.emplace_back([fd = listener.accept(), bytes, rounds] {
      std::vector<char> message(static_cast<size_t>(bytes));
      for (int r = 0; r < rounds; ++r) {
        receive_all(fd, message.data(), message.size());
        send_all(fd, message.data(), message.size());
      }
      ::close(fd);
    });
  }
  const auto start = Clock::now();
  std::vector<std::thread> trainers;
  for (size_t s = 0; s < clients.size(); ++s) {
    trainers.emplace_back([fd = clients[s], bytes = bytes_per_shard[s], rounds] {
      std::vector<char> push(static_cast<size_t>(bytes), 1);
      std::vector<char> pull(static_cast<size_t>(bytes));
      for (int r = 0; r < rounds; ++r) {
        send_all(fd, push.data(), push.size());
        receive_all(fd, pull.data(), pull.size());
      }
    });
  }
  for (auto& t : trainers) t.join();
  const double seconds = seconds_since(start);
  for (auto& e : echoes) e.join();
  for (const int fd : clients) ::close(fd);
  int64_t total = 0;
  for (const auto bytes : bytes_per_shard) total += 2 * bytes * rounds;
  return static_cast<double>(total) / seconds;
}

struct Result {
  int stripes = 0;
  double round_trips_per_second = 0;
  double bytes_per_second = 0;
  int64_t bytes_per_round_trip = 0;
  double tcp_round_trip_bytes_per_second = 0;  // raw TCP, same round trips, same run
  double cores_busy = 0;                       // CPU seconds per second during the round trips
};

// `stripes` 0: as many as cifar-train would use (layout.h).
Result measure(const std::string& model_name, int servers, int stripes,
               cifar::ps::proto::DType dtype, int rounds, bool tls = false) {
  auto model = cifar::models::make_model(model_name, {});
  std::vector<ParameterInfo> infos;
  std::vector<torch::Tensor> params;
  infos.reserve(model->parameters().size());
  params.reserve(model->parameters().size());
  for (const auto& p : model->named_parameters()) {
    infos.push_back({p.key(), p.value().numel()});
    params.push_back(p.value().detach().clone());
  }
  if (stripes == 0) stripes = cifar::ps::stripes_per_server(infos, servers);
  const int shards = servers * stripes;
  const cifar::ps::ShardLayout layout(infos, shards);

  std::vector<std::unique_ptr<cifar::ps::ShardServer>> running;
  cifar::ps::ClientOptions options;
  options.wire_dtype = dtype;
  options.stripes = stripes;
  cifar::ps::DoorOptions door;
  if (tls) {  // as a local job's: `cifar-train certs`
    cifar::security::CertificateRequest request;
    request.common_name = "bench job";
    request.ip_addresses = {"127.0.0.1"};
    options.tls = door.tls = cifar::security::make_job_credentials(request);
  }
  for (int server = 0; server < servers; ++server) {
    std::vector<std::shared_ptr<cifar::ps::Shard>> shard_stripes;
    for (int stripe = 0; stripe < stripes; ++stripe) {
      cifar::ps::ShardOptions shard_options;
      shard_options.index = server * stripes + stripe;
      shard_options.mode = cifar::ps::Mode::kAsync;
      shard_stripes.push_back(std::make_shared<cifar::ps::Shard>(shard_options, nullptr));
    }
    running.push_back(std::make_unique<cifar::ps::ShardServer>(shard_stripes, "127.0.0.1:0", door,
                                                               int64_t{512} << 20));
    options.addresses.push_back("127.0.0.1:" + std::to_string(running.back()->port()));
  }
  cifar::ps::PsClient client(options, layout, nullptr);
  cifar::ps::JobState state;
  state.trainers = 1;
  state.total_updates = int64_t{1} << 40;
  state.params = params;
  std::vector<std::unique_ptr<cifar::ps::proto::InitRequest>> requests;
  requests.reserve(static_cast<size_t>(shards));
  cifar::train::OptimizerOptions sgd;
  sgd.momentum = 0;  // plain SGD: the least work a PS can do per update
  sgd.nesterov = false;
  sgd.weight_decay = 0;
  for (int s = 0; s < shards; ++s) {
    requests.push_back(std::make_unique<cifar::ps::proto::InitRequest>(
        cifar::ps::make_init_request(layout, s, state, sgd)));
  }
  client.initialize(requests);
  client.register_trainer(0, true);

  std::vector<torch::Tensor> grads;
  grads.reserve(params.size());
  for (const auto& p : params) grads.push_back(torch::randn_like(p) * 1e-3);
  for (int i = 0; i < 3; ++i) client.push_pull(0, grads, params, 1e-3);  // warm-up
  Result r;
  const double cpu_start = process_cpu_seconds();
  const auto start = Clock::now();
  int64_t bytes = 0;
  for (int i = 0; i < rounds; ++i) {
    const auto e = client.push_pull(0, grads, params, 1e-3);
    bytes += e.pushed_bytes + e.pulled_bytes;
  }
  const double seconds = seconds_since(start);
  r.cores_busy = (process_cpu_seconds() - cpu_start) / seconds;
  r.stripes = stripes;
  r.round_trips_per_second = rounds / seconds;
  r.bytes_per_second = static_cast<double>(bytes) / seconds;
  r.bytes_per_round_trip = bytes / rounds;

  std::vector<int64_t> bytes_per_shard;
  for (int s = 0; s < shards; ++s) {
    int64_t elements = 0;
    for (const auto& piece : layout.pieces(s)) elements += piece.length;
    bytes_per_shard.push_back(elements * cifar::ps::wire_element_bytes(dtype));
  }
  r.tcp_round_trip_bytes_per_second = tcp_round_trip_bandwidth(bytes_per_shard, rounds);
  return r;
}

}  // namespace

// Plaintext against mutual TLS, alternately (a drift of the machine hits both alike).
int compare_tls(int rounds, const std::string& only) {
  fmt::print(
      "| parameters | stripes | MB per round trip | plaintext push+pull MB/s | TLS push+pull "
      "MB/s | TLS / plaintext | cores busy plaintext | cores busy TLS |\n"
      "|---|---|---|---|---|---|---|---|\n");
  for (const std::string model : {"alexnet", "resnet20"}) {
    if (!only.empty() && only != "all" && only != model) continue;
    std::vector<Result> plain;
    std::vector<Result> tls;
    for (int repeat = 0; repeat < 3; ++repeat) {
      plain.push_back(measure(model, 1, 0, cifar::ps::proto::FLOAT32, rounds));
      tls.push_back(measure(model, 1, 0, cifar::ps::proto::FLOAT32, rounds, true));
    }
    const auto median = [](std::vector<Result> results) {
      std::sort(results.begin(), results.end(), [](const Result& a, const Result& b) {
        return a.bytes_per_second < b.bytes_per_second;
      });
      return results[results.size() / 2];
    };
    const auto p = median(plain);
    const auto t = median(tls);
    fmt::print("| {} | {} | {:.2f} | {:.0f} | {:.0f} | {:.2f}x | {:.2f} | {:.2f} |\n", model,
               p.stripes, static_cast<double>(p.bytes_per_round_trip) / 1e6,
               p.bytes_per_second / 1e6, t.bytes_per_second / 1e6,
               t.bytes_per_second / p.bytes_per_second, p.cores_busy, t.cores_busy);
  }
  return 0;
}

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::stoi(argv[1]) : 40;
  spdlog::set_level(spdlog::level::warn);
  cifar::train::keep_freed_memory_for_reuse();  // as cifar-train does in every role
  torch::set_num_threads(1);
  if (argc > 3 && std::string(argv[3]) == "tls") return compare_tls(rounds, argv[2]);
  auto tcp = [] { return cifar::bench::median_tcp_stream_bandwidth(int64_t{2} << 30, false); };
  const double tcp_before = tcp();
  struct Case {
    std::string model;
    int servers;
    int stripes;
    cifar::ps::proto::DType dtype;
    const char* dtype_name;
  };
  // Stripes 0: cifar-train's own choice (layout.h); one stripe is how a PS served before stripes.
  const std::vector<Case> cases = {{"alexnet", 1, 1, cifar::ps::proto::FLOAT32, "fp32"},
                                   {"alexnet", 1, 2, cifar::ps::proto::FLOAT32, "fp32"},
                                   {"alexnet", 1, 0, cifar::ps::proto::FLOAT32, "fp32"},
                                   {"alexnet", 2, 1, cifar::ps::proto::FLOAT32, "fp32"},
                                   {"alexnet", 2, 0, cifar::ps::proto::FLOAT32, "fp32"},
                                   {"alexnet", 1, 0, cifar::ps::proto::FLOAT16, "fp16"},
                                   {"resnet20", 1, 1, cifar::ps::proto::FLOAT32, "fp32"},
                                   {"resnet20", 1, 2, cifar::ps::proto::FLOAT32, "fp32"},
                                   {"resnet20", 1, 0, cifar::ps::proto::FLOAT32, "fp32"},
                                   {"resnet20", 2, 1, cifar::ps::proto::FLOAT32, "fp32"},
                                   {"resnet20", 2, 0, cifar::ps::proto::FLOAT32, "fp32"}};
  std::vector<std::pair<Case, Result>> results;
  results.reserve(cases.size());
  std::string only = argc > 2 ? argv[2] : "";
  if (only == "all") only.clear();
  for (const auto& c : cases) {
    if (only.empty() || c.model == only) {
      results.emplace_back(c, measure(c.model, c.servers, c.stripes, c.dtype, rounds));
    }
  }
  const double tcp_after = tcp();
  const double tcp_bandwidth = (tcp_before + tcp_after) / 2;

  fmt::print("raw TCP loopback, one stream: {:.0f} MB/s (before {:.0f}, after {:.0f})\n\n",
             tcp_bandwidth / 1e6, tcp_before / 1e6, tcp_after / 1e6);
  fmt::print(
      "| parameters | PS servers | stripes each | wire | MB per round trip | round trips/s | "
      "push+pull MB/s "
      "| raw TCP, same round trips, MB/s | vs raw TCP same round trips | vs one TCP stream | cores "
      "busy |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const auto& [c, r] : results) {
    fmt::print(
        "| {} | {} | {}{} | {} | {:.2f} | {:.1f} | {:.0f} | {:.0f} | {:.0f}% | {:.0f}% | {:.2f} "
        "|\n",
        c.model, c.servers, r.stripes, c.stripes == 0 ? " (default)" : "", c.dtype_name,
        static_cast<double>(r.bytes_per_round_trip) / 1e6, r.round_trips_per_second,
        r.bytes_per_second / 1e6, r.tcp_round_trip_bytes_per_second / 1e6,
        100 * r.bytes_per_second / r.tcp_round_trip_bytes_per_second,
        100 * r.bytes_per_second / tcp_bandwidth, r.cores_busy);
  }
  return 0;
}
