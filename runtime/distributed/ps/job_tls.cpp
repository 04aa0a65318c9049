#include "distributed/ps/job_tls.h"

#include <stdexcept>

#include "contract/env.h"
#include "contract/flags.h"
#include "security/tls_dir.h"

namespace cifar::ps {

std::optional<security::JobCredentials> job_credentials(const Options& ps) {
  if (ps.insecure && !ps.tls_dir.empty()) {
    // Which one was meant cannot be known: plaintext where TLS was set up would be silent.
    throw std::invalid_argument(std::string(contract::flag::kInsecure.name) + " and " +
                                std::string(contract::flag::kTlsDir.name) + " " + ps.tls_dir +
                                " (or " + contract::env::kTlsDir +
                                ") contradict each other: give one of them");
  }
  if (ps.insecure) return std::nullopt;
  if (ps.tls_dir.empty()) {
    throw std::invalid_argument(
        std::string(
            "the parameter-server channel is mutual TLS: give the job's credentials with ") +
        std::string(contract::flag::kTlsDir.name) + " DIR (or " + contract::env::kTlsDir +
        "; `cifar-train certs --out DIR` makes them for a local job), or " +
        std::string(contract::flag::kInsecure.name) + " for plaintext");
  }
  return security::read_tls_dir(ps.tls_dir);
}

std::shared_ptr<grpc::ChannelCredentials> channel_credentials(
    const std::optional<security::JobCredentials>& tls) {
  if (!tls) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = tls->ca_certificate;
  options.pem_private_key = tls->private_key;
  options.pem_cert_chain = tls->certificate;
  return grpc::SslCredentials(options);
}

}  // namespace cifar::ps
