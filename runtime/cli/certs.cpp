#include "cli/certs.h"

#include <arpa/inet.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "contract/exit_codes.h"
#include "security/tls_dir.h"

namespace cifar::cli {
namespace {

bool is_ip_address(const std::string& host) {
  unsigned char address[16];
  return inet_pton(AF_INET, host.c_str(), address) == 1 ||
         inet_pton(AF_INET6, host.c_str(), address) == 1;
}

}  // namespace

int make_certificates(int argc, const char* const argv[]) {
  CLI::App app("Makes a job's TLS credentials (ca.crt, tls.crt, tls.key) for --tls-dir", "certs");
  std::string out;
  std::vector<std::string> hosts = {"localhost", "127.0.0.1"};
  int days = 365;
  app.add_option("--out", out, "Directory to write them to (created)")->required();
  app.add_option("--host", hosts,
                 "A name or address the job's processes reach each other by (repeat; default: "
                 "localhost and 127.0.0.1; '*.NAME' for every host under NAME)");
  app.add_option("--days", days, "Days the certificates are valid")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  try {
    app.parse(argc - 1, argv + 1);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? contract::kExitOk : contract::kExitUsage;
  }
  security::CertificateRequest request;
  request.common_name = "cifar-train job";
  for (const auto& host : hosts) {
    (is_ip_address(host) ? request.ip_addresses : request.dns_names).push_back(host);
  }
  request.valid_for = std::chrono::hours(24) * days;
  try {
    security::write_tls_dir(out, security::make_job_credentials(request));
  } catch (const std::exception& e) {
    std::cerr << "cifar-train certs: " << e.what() << "\n";
    return contract::kExitFailed;
  }
  std::cout << "wrote " << out << "/{" << security::kCaFile << "," << security::kCertificateFile
            << "," << security::kKeyFile << "}: use --tls-dir " << out << "\n";
  return contract::kExitOk;
}

}  // namespace cifar::cli
