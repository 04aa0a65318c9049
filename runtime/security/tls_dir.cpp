#include "security/tls_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
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

// Created with `mode` from the start (a key is never readable by others, not even for a moment),
// never through a symlink.
void write_file(const std::filesystem::path& path, const std::string& text, mode_t mode) {
  const auto failed = [&](const char* what) {
    return std::runtime_error(std::string("cannot ") + what + " " + path.string() + ": " +
                              std::strerror(errno));
  };
  struct File {
    int fd;
    ~File() { ::close(fd); }
  };
  const File file{
      ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, mode)};
  if (file.fd < 0) throw failed("create");
  if (::fchmod(file.fd, mode) != 0) throw failed("chmod");  // an existing file keeps its mode
  for (size_t written = 0; written < text.size();) {
    const auto n = ::write(file.fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw failed("write");
    written += static_cast<size_t>(n);
  }
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
  if (!key_matches(credentials.certificate, credentials.private_key)) {
    throw std::invalid_argument((dir / kKeyFile).string() + " is not the private key of " +
                                (dir / kCertificateFile).string());
  }
  return credentials;
}

void write_tls_dir(const std::filesystem::path& dir, const JobCredentials& credentials) {
  if (std::filesystem::create_directories(dir)) {  // one it made: its owner's only
    std::filesystem::permissions(dir, std::filesystem::perms::owner_all);
  }
  write_file(dir / kCaFile, credentials.ca_certificate, 0644);
  write_file(dir / kCertificateFile, credentials.certificate, 0644);
  write_file(dir / kKeyFile, credentials.private_key, 0600);
}

}  // namespace cifar::security
