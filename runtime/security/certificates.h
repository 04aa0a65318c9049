// A job's TLS identity, as its parameter-server channel uses it (mutual TLS): a CA made for the
// job alone and one certificate it signs, which every member of the job presents both as a server
// (its SANs: the members' DNS names and addresses) and as a client. Another job's certificate is
// signed by another CA, so a member of one job is a stranger to every other. ECDSA P-256 keys.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace cifar::security {

// PEM text, as Kubernetes' kubernetes.io/tls Secrets hold it (ca.crt, tls.crt, tls.key).
struct JobCredentials {
  std::string ca_certificate;
  std::string certificate;  // signed by ca_certificate
  std::string private_key;  // certificate's
};

struct CertificateRequest {
  // Names the job in both certificates (cut to X.509's 64 characters; the SANs are what peers
  // check).
  std::string common_name;
  std::vector<std::string> dns_names;     // SANs; a leading "*." is a one-label wildcard
  std::vector<std::string> ip_addresses;  // SANs
  std::chrono::seconds valid_for = std::chrono::hours(24 * 365);
  // From a little before now: a member whose clock runs behind still accepts it.
  std::chrono::seconds valid_before_now = std::chrono::minutes(5);
};

// A new CA and a certificate for the request, signed by it (std::runtime_error if OpenSSL fails).
JobCredentials make_job_credentials(const CertificateRequest& request);

// Why `certificate_pem` cannot be used now ("expired on 2026-11-28 09:00:00 UTC", "not valid
// before ..."), or "" when it can. std::invalid_argument if it is no PEM certificate.
std::string validity_problem(const std::string& certificate_pem);

// Whether `certificate_pem` is signed by `ca_pem` (and valid now): the check a member makes of
// a peer's certificate.
bool issued_by(const std::string& certificate_pem, const std::string& ca_pem);

// The subject's common name (for logs: who a peer says it is). std::invalid_argument if it is no
// PEM certificate; "" if it has none.
std::string common_name_of(const std::string& certificate_pem);

// When `certificate_pem` stops being valid. std::invalid_argument if it is no PEM certificate.
std::chrono::system_clock::time_point expiry_of(const std::string& certificate_pem);

// Whether `private_key_pem` is the private half of `certificate_pem`'s key.
bool key_matches(const std::string& certificate_pem, const std::string& private_key_pem);

}  // namespace cifar::security
