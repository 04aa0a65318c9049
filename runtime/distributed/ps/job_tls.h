// The job's TLS on the PS channel, from the flags: the credentials a PS job's processes use
// (--tls-dir / CIFAR_TLS_DIR, or none with --insecure) and the channel credentials a trainer
// calls a PS with. The server's side is the door (token_auth.h).
#pragma once

#include <grpcpp/security/credentials.h>

#include <memory>
#include <optional>

#include "config/ps_options.h"
#include "security/certificates.h"

namespace cifar::ps {

// Which end of the PS channel a process is: a parameter server serves, a trainer calls.
enum class ChannelEnd { kServes, kCalls };

// The credentials in ps.tls_dir, checked (security/tls_dir.h) and fit for `end`; none with
// ps.insecure. std::invalid_argument when neither is given, or the directory's files are missing,
// expired, not yet valid, not the CA's, or the other end's (a trainer given the PS's certificate).
std::optional<security::JobCredentials> job_credentials(const Options& ps, ChannelEnd end);

// Mutual TLS with `tls` (the server must present a certificate of the job's CA for the address
// called; the client presents its own); plaintext without.
std::shared_ptr<grpc::ChannelCredentials> channel_credentials(
    const std::optional<security::JobCredentials>& tls);

}  // namespace cifar::ps
