#include "cli/rendezvous_store.h"

#include <CLI/CLI.hpp>
#include <chrono>
#include <exception>
#include <iostream>
#include <thread>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "cli/stop_signal.h"
#include "contract/ports.h"
#include "distributed/allreduce/rendezvous.h"

namespace cifar::cli {

int serve_rendezvous_store(int argc, const char* const argv[]) {
  CLI::App app{
      "Hosts the c10d store that the ranks of an elastic all-reduce job (--min-ranks) "
      "meet at, as MASTER_ADDR:MASTER_PORT",
      "cifar-train rendezvous-store"};
  int port = contract::kC10dStorePort.number;
  app.add_option("--port", port, "Port to listen on")
      ->check(CLI::Range(1, 65535))
      ->capture_default_str();
  try {
    app.parse(argc - 1, argv + 1);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  catch_stop_signals();
  try {
    const auto store = allreduce::Rendezvous::host_store("0.0.0.0", port);
    std::cout << "cifar-train rendezvous-store: listening on port " << port << std::endl;
    while (g_stop_signal == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  } catch (const std::exception& e) {
    std::cerr << "cifar-train rendezvous-store: cannot listen on port " << port << ": " << e.what()
              << "\n";
    return 1;
  }
  return 0;
}

}  // namespace cifar::cli
