// The job's TLS identities (security/): what make_job_credentials and make_job_identities make
// holds together, each role's certificate does what its role does and no more, and is nobody
// else's; times out of range are named, and a credentials directory is read with errors
// that name the file and written with the key its owner's alone.
#include "security/certificates.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <fstream>
#include <stdexcept>
#include <string>

#include "security/tls_dir.h"
#include "tests/support/process.h"

namespace cifar::security {
namespace {

using cifar::testing::TempDir;
using std::chrono::hours;
using std::chrono::seconds;

CertificateRequest request(std::string name = "team/mnist") {
  CertificateRequest r;
  r.common_name = std::move(name);
  r.dns_names = {"*.mnist.team.svc"};
  r.ip_addresses = {"127.0.0.1"};
  return r;
}

std::string what_reading_throws(const std::filesystem::path& dir) {
  try {
    static_cast<void>(read_tls_dir(dir));
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(JobCredentials, HoldTogetherAndAreNoOtherJobs) {
  const auto job = make_job_credentials(request());
  const auto other = make_job_credentials(request());
  EXPECT_TRUE(issued_by(job.certificate, job.ca_certificate));
  EXPECT_TRUE(key_matches(job.certificate, job.private_key));
  EXPECT_FALSE(issued_by(job.certificate, other.ca_certificate));  // same names, another CA
  EXPECT_FALSE(key_matches(job.certificate, other.private_key));
  EXPECT_FALSE(issued_by("not a certificate", job.ca_certificate));
  EXPECT_EQ(validity_problem(job.certificate), "");
  const auto left = expiry_of(job.certificate) - std::chrono::system_clock::now();
  EXPECT_GT(left, hours(24 * 365) - hours(1));
  EXPECT_LT(left, hours(24 * 365) + hours(1));
  EXPECT_THROW(validity_problem("garbage"), std::invalid_argument);
}

// An operator's job: one CA for both roles; the PS's certificate serves under the job's names and
// cannot call, the trainers' calls and cannot serve; a local job's one certificate does both.
TEST(JobIdentities, EachRoleMayDoWhatItDoesAndNoMore) {
  const auto roles = make_job_identities(request());
  const auto& ps = roles.parameter_server;
  const auto& trainer = roles.trainer;
  EXPECT_EQ(ps.ca_certificate, trainer.ca_certificate);
  for (const auto* own : {&ps, &trainer}) {
    EXPECT_TRUE(issued_by(own->certificate, own->ca_certificate));
    EXPECT_TRUE(key_matches(own->certificate, own->private_key));
  }
  EXPECT_FALSE(key_matches(ps.certificate, trainer.private_key));
  EXPECT_TRUE(may_serve(ps.certificate));
  EXPECT_FALSE(may_call(ps.certificate));
  EXPECT_TRUE(may_call(trainer.certificate));
  EXPECT_FALSE(may_serve(trainer.certificate));
  EXPECT_EQ(common_name_of(ps.certificate), "team/mnist parameter server");
  EXPECT_EQ(common_name_of(trainer.certificate), "team/mnist trainer");
  const auto local = make_job_credentials(request());
  EXPECT_TRUE(may_serve(local.certificate));
  EXPECT_TRUE(may_call(local.certificate));
  EXPECT_FALSE(may_call("no certificate"));
}

TEST(JobCredentials, ANameLongerThanX509AllowsIsCutNotRefused) {
  const std::string name = std::string(63, 'n') + "/" + std::string(63, 'j');
  const auto job = make_job_credentials(request(name));
  EXPECT_TRUE(issued_by(job.certificate, job.ca_certificate));
  EXPECT_EQ(common_name_of(job.certificate), name.substr(0, 64));  // X.509's ub-common-name
  EXPECT_EQ(common_name_of(job.ca_certificate), ("CA " + name).substr(0, 64));
  EXPECT_EQ(common_name_of(make_job_credentials(request()).certificate), "team/mnist");
}

TEST(JobCredentials, OutOfTheirTimeTheySayWhen) {
  auto expired = request();
  expired.valid_before_now = hours(48);
  expired.valid_for = -hours(24);
  EXPECT_EQ(validity_problem(make_job_credentials(expired).certificate).rfind("expired on ", 0),
            0U);
  auto early = request();
  early.valid_before_now = -hours(1);
  const auto problem = validity_problem(make_job_credentials(early).certificate);
  EXPECT_EQ(problem.rfind("not valid before ", 0), 0U) << problem;
  EXPECT_NE(problem.find(" UTC"), std::string::npos) << problem;
}

TEST(TlsDir, IsWrittenWithTheKeyItsOwnersAloneAndReadBack) {
  TempDir work;
  const auto dir = work.path() / "tls";
  const auto job = make_job_credentials(request());
  write_tls_dir(dir, job);
  struct stat key {};
  struct stat made {};
  ASSERT_EQ(::stat((dir / kKeyFile).c_str(), &key), 0);
  ASSERT_EQ(::stat(dir.c_str(), &made), 0);
  EXPECT_EQ(key.st_mode & 0777, 0600U);
  EXPECT_EQ(made.st_mode & 0777, 0700U);
  const auto read = read_tls_dir(dir);
  EXPECT_EQ(read.ca_certificate, job.ca_certificate);
  EXPECT_EQ(read.certificate, job.certificate);
  EXPECT_EQ(read.private_key, job.private_key);
}

TEST(TlsDir, WhatIsWrongIsNamedWithItsFile) {
  TempDir work;
  const auto dir = work.path() / "tls";
  const auto job = make_job_credentials(request());
  const auto other = make_job_credentials(request());
  write_tls_dir(dir, {job.ca_certificate, job.certificate, other.private_key});
  EXPECT_EQ(what_reading_throws(dir), (dir / "tls.key").string() + " is not the private key of " +
                                          (dir / "tls.crt").string());
  write_tls_dir(dir, {other.ca_certificate, job.certificate, job.private_key});
  EXPECT_EQ(what_reading_throws(dir),
            (dir / "tls.crt").string() + " is not issued by " + (dir / "ca.crt").string());
  std::filesystem::remove(dir / "ca.crt");
  EXPECT_EQ(what_reading_throws(dir), "cannot read " + (dir / "ca.crt").string());
  std::ofstream(dir / "ca.crt") << "garbage";
  EXPECT_EQ(what_reading_throws(dir),
            "the job's TLS certificate " + (dir / "ca.crt").string() + " is not a PEM certificate");
}

}  // namespace
}  // namespace cifar::security
