// The job's credentials as files: a directory with ca.crt, tls.crt and tls.key (the keys of the
// operator's Secret, mounted; `cifar-train certs --out DIR` writes them for a local job).
#pragma once

#include <filesystem>

#include "security/certificates.h"

namespace cifar::security {

inline constexpr char kCaFile[] = "ca.crt";
inline constexpr char kCertificateFile[] = "tls.crt";
inline constexpr char kKeyFile[] = "tls.key";

// Reads and checks them: each present and PEM, the certificate valid now and issued by the CA.
// std::invalid_argument naming the file and what is wrong.
JobCredentials read_tls_dir(const std::filesystem::path& dir);

// Writes them (the key readable by its owner only); creates `dir`.
void write_tls_dir(const std::filesystem::path& dir, const JobCredentials& credentials);

}  // namespace cifar::security
