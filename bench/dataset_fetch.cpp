// A CIFAR dataset fetched from object storage (data/s3_fetch.h) into an empty directory, as each
// pod of a job with dataset.uri does, with 1, 2, 4, ... ranged GETs in flight for each of the two
// files fetched at once (the default): the median time of
// `runs` whole fetches and its throughput. The store's endpoint and keys come from the
// environment (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, ...), as cifar-train's do;
// bench/dataset_fetch.sh starts a local SeaweedFS with CIFAR-10 in it and sets them.
//   bench-dataset-fetch --uri s3://BUCKET/PREFIX --dir DIR [--dataset cifar10] [--streams 1,2,4,8]
//   [--range-mb 8] [--runs 5]
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "bench/support/guarded_main.h"
#include "data/s3_fetch.h"
#include "storage/s3_store.h"

namespace {

int run(int argc, char** argv) {
  CLI::App app{"dataset fetch from object storage: time and throughput per ranged GETs in flight"};
  std::string uri;
  std::string dir;
  std::string dataset = "cifar10";
  std::vector<int> streams = {1, 2, 4, 8};
  int64_t range_mb = 8;
  int runs = 5;
  app.add_option("--uri", uri, "s3://BUCKET/PREFIX of the dataset's files")->required();
  app.add_option("--dir", dir, "scratch directory, emptied before each fetch")->required();
  app.add_option("--dataset", dataset, "cifar10 or cifar100");
  app.add_option("--streams", streams, "ranged GETs in flight, one row each")->delimiter(',');
  app.add_option("--range-mb", range_mb, "bytes of one ranged GET, MiB");
  app.add_option("--runs", runs, "fetches per row (the median is shown)");
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::warn);

  cifar::storage::S3Client client(cifar::storage::s3_options_from_environment());
  const auto from = cifar::storage::parse_s3_uri(uri);
  std::printf(
      "| ranged GETs in flight per file (two files at once) | fetch, median of %d | "
      "throughput |\n",
      runs);
  std::printf("|---:|---:|---:|\n");
  for (const int in_flight : streams) {
    cifar::data::FetchOptions options;
    options.streams = in_flight;
    options.range_bytes = range_mb << 20;
    std::vector<double> seconds;
    int64_t bytes = 0;
    for (int run = 0; run < runs; ++run) {
      std::filesystem::remove_all(dir);
      const auto start = std::chrono::steady_clock::now();
      bytes = cifar::data::fetch_dataset(client, from, dataset, dir, options).bytes;
      seconds.push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    std::sort(seconds.begin(), seconds.end());
    const double median = seconds[seconds.size() / 2];
    std::printf("| %d | %.2f s | %.0f MB/s |\n", in_flight, median,
                static_cast<double>(bytes) / 1e6 / median);
    std::fflush(stdout);
  }
  std::filesystem::remove_all(dir);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return cifar::bench::guarded_main("bench-dataset-fetch", [&] { return run(argc, argv); });
}
