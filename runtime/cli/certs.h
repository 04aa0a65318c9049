// `cifar-train certs --out DIR [--host NAME|IP]... [--days N]`: makes a job's TLS credentials
// (a CA of its own and one certificate it signs: security/certificates.h) and writes them to DIR
// as ca.crt, tls.crt and tls.key, for the processes of a local PS job (`--tls-dir DIR`). The
// certificate names localhost and 127.0.0.1 unless --host says which names the job's processes
// reach each other by; it serves and calls (the processes of a local job are one user's). On
// Kubernetes the operator makes them, per job and role.
#pragma once

namespace cifar::cli {

// argv[1] is "certs". Returns the process exit code.
int make_certificates(int argc, const char* const argv[]);

}  // namespace cifar::cli
