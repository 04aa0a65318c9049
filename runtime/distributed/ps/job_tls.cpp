#include "distributed/ps/job_tls.h"

#include <filesystem>
#include <stdexcept>

#include "contract/env.h"
#include "contract/flags.h"
#include "security/tls_dir.h"

namespace cifar::ps {

std::optional<security::JobCredentials> job_credentials(const Options& ps, ChannelEnd end) {
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
  auto credentials = security::read_tls_dir(ps.tls_dir);
  const auto certificate =
      (std::filesystem::path(ps.tls_dir) / security::kCertificateFile).string();
  if (end == ChannelEnd::kServes && !security::may_serve(credentials.certificate)) {
    throw std::invalid_argument(certificate +
                                " may not serve (a trainer's certificate): a parameter server "
                                "needs its own, which the operator mounts for the PS pods");
  }
  if (end == ChannelEnd::kCalls && !security::may_call(credentials.certificate)) {
    throw std::invalid_argument(certificate +
                                " may not call a parameter server (a PS's certificate): a trainer "
                                "needs the trainers', which the operator mounts for them");
  }
  return credentials;
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
