#include "security/tls_dir.h"

#include <sys/stat.h>

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

namespace cifar::security {
namespace {

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::invalid_argument("cannot read " + path.string());
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void write_file(const std::filesystem::path& path, const std::string& text, mode_t mode) {
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out.flush()) throw std::runtime_error("cannot write " + path.string());
  }
  if (::chmod(path.c_str(), mode) != 0) throw std::runtime_error("cannot chmod " + path.string());
}

}  // namespace

JobCredentials read_tls_dir(const std::filesystem::path& dir) {
  JobCredentials credentials{read_file(dir / kCaFile), read_file(dir / kCertificateFile),
                             read_file(dir / kKeyFile)};
  for (const auto& [file, pem] : {std::pair{kCaFile, &credentials.ca_certificate},
                                  std::pair{kCertificateFile, &credentials.certificate}}) {
    std::string problem;
    try {
      problem = validity_problem(*pem);
    } catch (const std::invalid_argument& e) {
      problem = e.what();
    }
    if (!problem.empty()) {
      throw std::invalid_argument("the job's TLS certificate " + (dir / file).string() + " is " +
                                  problem);
    }
  }
  if (!issued_by(credentials.certificate, credentials.ca_certificate)) {
    throw std::invalid_argument((dir / kCertificateFile).string() + " is not issued by " +
                                (dir / kCaFile).string());
  }
  if (credentials.private_key.find("PRIVATE KEY-----") == std::string::npos) {
    throw std::invalid_argument((dir / kKeyFile).string() + " holds no PEM private key");
  }
  return credentials;
}

void write_tls_dir(const std::filesystem::path& dir, const JobCredentials& credentials) {
  std::filesystem::create_directories(dir);
  write_file(dir / kCaFile, credentials.ca_certificate, 0644);
  write_file(dir / kCertificateFile, credentials.certificate, 0644);
  write_file(dir / kKeyFile, credentials.private_key, 0600);
}

}  // namespace cifar::security
