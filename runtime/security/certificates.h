// A job's TLS identities, as its parameter-server channel uses them (mutual TLS): a CA made for the
// job alone, and the certificates it signs. An operator's job has two: the parameter servers'
// (a server certificate under the members' DNS names) and the trainers' (a client certificate
// that names no host), so that a trainer cannot pose as a PS nor a PS call another; the CA's key
// is dropped once they are signed. A local job (`cifar-train certs`) has one certificate that
// serves and calls. Another job's certificates are signed by another CA, so a member of one job is
// a stranger to every other. ECDSA P-256 keys.
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
  // Names the job in its certificates (cut to X.509's 64 characters; the SANs are what peers
  // check).
  std::string common_name;
  std::vector<std::string> dns_names;     // SANs; a leading "*." is a one-label wildcard
  std::vector<std::string> ip_addresses;  // SANs
  std::chrono::seconds valid_for = std::chrono::hours(24 * 365);
  // From a little before now: a member whose clock runs behind still accepts it.
  std::chrono::seconds valid_before_now = std::chrono::minutes(5);
};

// A new CA and one certificate for the request, signed by it, that serves under the request's
// names and calls (std::runtime_error if OpenSSL fails).
JobCredentials make_job_credentials(const CertificateRequest& request);

// Each role's credentials, signed by one new CA.
struct JobIdentities {
  JobCredentials
      parameter_server;    // serverAuth, under the request's names; "<cn> parameter server"
  JobCredentials trainer;  // clientAuth, no names; "<cn> trainer"
};
JobIdentities make_job_identities(const CertificateRequest& request);

// Whether the certificate may be presented by a TLS server (`may_serve`) or client (`may_call`):
// its extended key usage allows it (one without any allows both).
bool may_serve(const std::string& certificate_pem);
bool may_call(const std::string& certificate_pem);

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
