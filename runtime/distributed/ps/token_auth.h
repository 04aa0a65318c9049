// The PS's door: the listening port's credentials, and the checks every call passes before its
// request message is read. Mutual TLS with the job's credentials (security/certificates.h): the
// port speaks TLS only, asks every caller for its certificate, and admits a call only if that
// certificate was issued by the job's own CA and is a caller's (a trainer's: a PS's own server
// certificate is refused, so that a PS's key cannot drive another PS); then the job token,
// "authorization: Bearer <token>" (one more check, not a second factor: it reaches the same pods
// as the keys). A refused call is UNAUTHENTICATED and has cost the server its headers, not its
// payload. The comparison of tokens takes the same time wherever they differ. A plaintext caller
// of a TLS port never gets as far as a call: its connection fails in the handshake (UNAVAILABLE at
// its end), which gRPC does not report to us.
//
// The checks run in gRPC's auth filter (an auth metadata processor on the core credentials):
// gRPC's C++ InsecureServerCredentials cannot take one (it asserts), the core's can. An admitted
// certificate is remembered (a job has a few: one verification each per process, not per call).
#pragma once

#include <grpcpp/security/server_credentials.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "security/certificates.h"

namespace cifar::ps {

enum class Refusal { kNoCertificate, kForeignCertificate, kNotACaller, kToken };
std::string_view refusal_name(Refusal refusal);  // the metric's label: no_certificate, ...

struct DoorOptions {
  std::string token;                            // empty: no token asked for
  std::optional<security::JobCredentials> tls;  // none: plaintext (--insecure)
  std::function<void(Refusal)> on_refusal;      // counts refusals; called on gRPC's threads
};

std::shared_ptr<grpc::ServerCredentials> door_credentials(DoorOptions options);

// Whether `given` equals `expected`, in a time that depends only on their lengths.
bool equal_in_constant_time(std::string_view given, std::string_view expected);

inline constexpr std::string_view kTokenRefusal =
    "missing or wrong job token (CIFAR_PS_TOKEN must match the PS's)";
inline constexpr std::string_view kNoCertificateRefusal =
    "no client certificate: the PS admits the job's members, which present the job's certificate "
    "(CIFAR_TLS_DIR)";
inline constexpr std::string_view kForeignCertificateRefusal =
    "a client certificate not issued by this job's CA";
inline constexpr std::string_view kNotACallerRefusal =
    "a certificate of this job that may not call a PS (a parameter server's own): the PS admits "
    "the job's trainers";

}  // namespace cifar::ps
