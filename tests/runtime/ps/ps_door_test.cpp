// The PS's door (distributed/ps/token_auth.h) on a real cifar-train PS process, serving mutual TLS
// with its job's credentials: a push without the job's token is refused before the server reads
// its payload, so a 256 MB push costs the PS its headers, not 256 MB (the same push with the token
// is read: the measurement can tell); a caller without the job's certificate, with another job's,
// with the PS's own (an operator's job has one per role), or in plaintext is refused, and the PS
// counts the refusals it sees; a server with a trainer's certificate is refused by its callers;
// credentials that have expired, are not yet valid or are the other role's stop the process with
// a message that says so.
#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <future>
#include <iostream>
#include <regex>
#include <string>
#include <vector>

#include "distributed/ps/token_auth.h"
#include "security/tls_dir.h"
#include "tests/support/process.h"

namespace cifar::ps {
namespace {

using cifar::testing::ChildProcess;
using cifar::testing::TempDir;
using namespace std::chrono_literals;

// The process's peak resident memory (VmHWM), in MB.
int64_t peak_rss_mb(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) / 1024;
  }
  throw std::runtime_error("no VmHWM for pid " + std::to_string(pid));
}

// One unary PushPull of `bytes` bytes of garbage, as any client on the network could send it.
grpc::Status push_bytes(const std::shared_ptr<grpc::Channel>& channel, size_t bytes,
                        const std::string& token) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
  context.set_deadline(std::chrono::system_clock::now() + 60s);
  grpc::Slice slice(std::string(bytes, 'x'));
  grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  std::promise<grpc::Status> done;
  stub.UnaryCall(&context, "/cifar.ps.proto.ParameterServer/PushPull", grpc::StubOptions(),
                 &request, &response, [&](const grpc::Status& s) { done.set_value(s); });
  return done.get_future().get();
}

// Credentials for a job whose processes reach each other at 127.0.0.1, valid from `from` to `to`
// (seconds from now).
security::JobCredentials credentials(int64_t from = -300, int64_t to = 86400) {
  security::CertificateRequest request;
  request.common_name = "door test job";
  request.ip_addresses = {"127.0.0.1"};
  request.valid_before_now = std::chrono::seconds(-from);
  request.valid_for = std::chrono::seconds(to);
  return security::make_job_credentials(request);
}

// Mutual TLS as a member of the job holding `own` would call, trusting `trusted`'s CA; no client
// certificate without `own`.
std::shared_ptr<grpc::ChannelCredentials> tls(const security::JobCredentials& trusted,
                                              const security::JobCredentials* own) {
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = trusted.ca_certificate;
  if (own != nullptr) {
    options.pem_private_key = own->private_key;
    options.pem_cert_chain = own->certificate;
  }
  return grpc::SslCredentials(options);
}

// The per-role credentials of an operator's job whose processes reach each other at 127.0.0.1.
security::JobIdentities identities() {
  security::CertificateRequest request;
  request.common_name = "door test job";
  request.ip_addresses = {"127.0.0.1"};
  return security::make_job_identities(request);
}

// A cifar-train PS serving the job's credentials, with the job's token.
class PsDoor : public ::testing::Test {
 protected:
  void SetUp() override { start_ps(job_); }

  void start_ps(const security::JobCredentials& served) {
    security::write_tls_dir(work_.path() / "tls", served);
    ::setenv("CIFAR_PS_TOKEN", "the-jobs-token", 1);
    ps_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{
            CIFAR_TRAIN_BIN, "-m", "simplecnn", "-md", (work_.path() / "model").string(),
            "--metrics-port", std::to_string(metrics_port_), "--distributed", "--dist-type", "ps",
            "--ps-count", "1", "--worker-count", "1", "--dist-start-port", std::to_string(port_),
            "--tls-dir", (work_.path() / "tls").string()},
        work_.path() / "ps.log");
    ::unsetenv("CIFAR_PS_TOKEN");
  }

  std::shared_ptr<grpc::Channel> channel(const std::shared_ptr<grpc::ChannelCredentials>& as) {
    grpc::ChannelArguments args;
    args.SetMaxSendMessageSize(-1);
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a connection (a handshake) of its own
    return grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port_), as, args);
  }
  std::string log() { return cifar::testing::read_file(work_.path() / "ps.log"); }

  // The PS's count of refusals for `reason` (0 while it has none).
  int refusals(const std::string& reason) {
    const auto text =
        cifar::testing::http_get("http://127.0.0.1:" + std::to_string(metrics_port_) + "/metrics");
    std::smatch match;
    const std::regex series("cifar_ps_refused_calls_total\\{[^}]*reason=\"" + reason +
                            "\"[^}]*\\} ([0-9.e+]+)");
    return std::regex_search(text, match, series) ? static_cast<int>(std::stod(match[1])) : 0;
  }

  TempDir work_;
  int port_ = cifar::testing::free_port();
  int metrics_port_ = cifar::testing::free_port();
  security::JobCredentials job_ = credentials();
  std::unique_ptr<ChildProcess> ps_;
};

TEST_F(PsDoor, AnUnauthenticatedOversizedPushIsRefusedBeforeItsPayloadIsRead) {
  const auto member = channel(tls(job_, &job_));
  ASSERT_TRUE(member->WaitForConnected(std::chrono::system_clock::now() + 30s)) << log();

  constexpr size_t kPush = size_t{256} << 20;
  const auto before = peak_rss_mb(ps_->pid());
  for (const auto* token : {"", "a-guess"}) {
    const auto refused = push_bytes(member, kPush, token);
    EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAUTHENTICATED) << refused.error_message();
    EXPECT_EQ(refused.error_message(), kTokenRefusal);
  }
  const auto after_refusals = peak_rss_mb(ps_->pid());
  EXPECT_LT(after_refusals - before, 32)
      << "the PS read a refused push: " << before << " MB -> " << after_refusals << " MB";
  EXPECT_EQ(refusals("token"), 2);

  // With the token the same bytes get in, are read, and are refused as no PushRequest: the
  // measurement sees a read payload.
  const auto read = push_bytes(member, kPush, "the-jobs-token");
  EXPECT_NE(read.error_code(), grpc::StatusCode::UNAUTHENTICATED) << read.error_message();
  EXPECT_FALSE(read.ok());
  const auto after_read = peak_rss_mb(ps_->pid());
  std::cout << "PS peak RSS: " << before << " MB, after two refused 256 MB pushes "
            << after_refusals << " MB, after one admitted " << after_read << " MB\n";
  EXPECT_GT(after_read - after_refusals, 200);
  EXPECT_TRUE(ps_->running());  // and it kept serving
}

TEST_F(PsDoor, OnlyTheJobsCertificateGetsInAndEveryRefusalItSeesIsCounted) {
  const auto other_job = credentials();
  ASSERT_TRUE(channel(tls(job_, &job_))->WaitForConnected(std::chrono::system_clock::now() + 30s))
      << log();
  // The job's token, but no certificate, or another job's: refused at the door, and counted.
  const auto anonymous = push_bytes(channel(tls(job_, nullptr)), 1024, "the-jobs-token");
  EXPECT_EQ(anonymous.error_code(), grpc::StatusCode::UNAUTHENTICATED) << anonymous.error_message();
  EXPECT_EQ(anonymous.error_message(), kNoCertificateRefusal);
  const auto stranger = push_bytes(channel(tls(job_, &other_job)), 1024, "the-jobs-token");
  EXPECT_EQ(stranger.error_code(), grpc::StatusCode::UNAUTHENTICATED) << stranger.error_message();
  EXPECT_EQ(stranger.error_message(), kForeignCertificateRefusal);
  EXPECT_EQ(refusals("no_certificate"), 1);
  EXPECT_EQ(refusals("foreign_certificate"), 1);
  // Plaintext never gets past the TLS handshake (no call for the door to count).
  const auto plaintext =
      push_bytes(channel(grpc::InsecureChannelCredentials()), 1024, "the-jobs-token");
  EXPECT_EQ(plaintext.error_code(), grpc::StatusCode::UNAVAILABLE) << plaintext.error_message();
  // And a member checks the PS too: a server whose certificate is not its job's CA's is refused.
  const auto impostor = push_bytes(channel(tls(other_job, &other_job)), 1024, "the-jobs-token");
  EXPECT_EQ(impostor.error_code(), grpc::StatusCode::UNAVAILABLE) << impostor.error_message();
  EXPECT_TRUE(ps_->running());
}

// An operator's job: its PS serves the parameter servers' certificate, and admits a trainer's but
// not its own (a PS's key does not make a caller); a "PS" that serves a trainer's certificate is
// refused by its callers (it may not serve, and names no host).
class PsDoorOfPerRoleCredentials : public PsDoor {
 protected:
  void SetUp() override { start_ps(roles_.parameter_server); }
  security::JobIdentities roles_ = identities();
};

TEST_F(PsDoorOfPerRoleCredentials, ATrainerGetsInAndThePsOwnCertificateIsRefusedAsACaller) {
  const auto& trainer = roles_.trainer;
  ASSERT_TRUE(
      channel(tls(trainer, &trainer))->WaitForConnected(std::chrono::system_clock::now() + 30s))
      << log();
  EXPECT_NE(log().find("mutual TLS with the job's certificate \"door test job parameter server\""),
            std::string::npos)
      << log();
  // Admitted, and refused only as no PushRequest.
  const auto admitted = push_bytes(channel(tls(trainer, &trainer)), 1024, "the-jobs-token");
  EXPECT_NE(admitted.error_code(), grpc::StatusCode::UNAUTHENTICATED) << admitted.error_message();
  const auto& ps = roles_.parameter_server;
  const auto posing = push_bytes(channel(tls(trainer, &ps)), 1024, "the-jobs-token");
  EXPECT_EQ(posing.error_code(), grpc::StatusCode::UNAUTHENTICATED) << posing.error_message();
  EXPECT_EQ(posing.error_message(), kNotACallerRefusal);
  EXPECT_EQ(refusals("not_a_caller"), 1);
  EXPECT_EQ(refusals("foreign_certificate"), 0);
  EXPECT_TRUE(ps_->running());
}

TEST(PsDoorPerRoleCredentials, AServerWithATrainersCertificateIsRefusedByItsCallers) {
  const auto roles = identities();
  const auto& trainer = roles.trainer;
  const int port = cifar::testing::free_port();
  grpc::SslServerCredentialsOptions options(GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_BUT_DONT_VERIFY);
  options.pem_root_certs = trainer.ca_certificate;
  options.pem_key_cert_pairs.push_back({trainer.private_key, trainer.certificate});
  grpc::AsyncGenericService service;  // no handler: a call that got through would hang, not fail
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:" + std::to_string(port),
                           grpc::SslServerCredentials(options));
  builder.RegisterAsyncGenericService(&service);
  const auto queue = builder.AddCompletionQueue();
  const auto server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  const auto impostor =
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), tls(trainer, &trainer));
  EXPECT_FALSE(impostor->WaitForConnected(std::chrono::system_clock::now() + 5s));
  server->Shutdown(std::chrono::system_clock::now());
  queue->Shutdown();
  void* tag = nullptr;
  bool ok = false;
  while (queue->Next(&tag, &ok)) {
  }
}

// A member given the other role's credentials does not start, and says whose they are.
TEST(PsDoorPerRoleCredentials, AProcessGivenTheOtherRolesCertificateSaysSoAndDoesNotStart) {
  const auto roles = identities();
  for (const auto& [role, given, said] :
       {std::tuple{std::string("ps"), roles.trainer,
                   std::string("may not serve (a trainer's certificate)")},
        std::tuple{std::string("worker"), roles.parameter_server,
                   std::string("may not call a parameter server (a PS's certificate)")}}) {
    TempDir work;
    security::write_tls_dir(work.path() / "tls", given);
    const auto result = cifar::testing::run_process(
        {CIFAR_TRAIN_BIN, "-m", "simplecnn", "-md", (work.path() / "model").string(),
         "--metrics-port", "-1", "--distributed", "--dist-type", role, "--ps-count", "1",
         "--worker-count", "1", "--dist-start-port", std::to_string(cifar::testing::free_port()),
         "--tls-dir", (work.path() / "tls").string()});
    EXPECT_EQ(result.exit_code, 2) << role << ": " << result.output;
    EXPECT_NE(result.output.find((work.path() / "tls" / "tls.crt").string() + " " + said),
              std::string::npos)
        << role << ": " << result.output;
  }
}

// The PS's own credentials out of their time: it does not start, and says why.
TEST(PsDoorCredentials, ExpiredOrNotYetValidOnesStopThePsWithAClearMessage) {
  for (const auto& [from, to, said] :
       {std::tuple{int64_t{-172800}, int64_t{-86400}, std::string("is expired on ")},
        std::tuple{int64_t{3600}, int64_t{86400}, std::string("is not valid before ")}}) {
    TempDir work;
    security::write_tls_dir(work.path() / "tls", credentials(from, to));
    const auto result = cifar::testing::run_process(
        {CIFAR_TRAIN_BIN, "-m", "simplecnn", "-md", (work.path() / "model").string(),
         "--metrics-port", "-1", "--distributed", "--dist-type", "ps", "--ps-count", "1",
         "--worker-count", "1", "--dist-start-port", std::to_string(cifar::testing::free_port()),
         "--tls-dir", (work.path() / "tls").string()});
    EXPECT_EQ(result.exit_code, 2) << result.output;
    const std::string expected =
        "the job's TLS certificate " + (work.path() / "tls" / "ca.crt").string() + " " + said;
    EXPECT_NE(result.output.find(expected), std::string::npos) << result.output;
  }
}

// --insecure with credentials (the flag, or the env a pod gets) is a contradiction: refused, not
// silently plaintext. Plaintext on its own runs, and says so in capitals.
TEST(PsDoorCredentials, InsecureWithCredentialsIsRefusedAndPlaintextIsSaidLoudly) {
  TempDir work;
  security::write_tls_dir(work.path() / "tls", credentials(-60, 86400));
  const std::vector<std::string> ps = {CIFAR_TRAIN_BIN,
                                       "-m",
                                       "simplecnn",
                                       "-md",
                                       (work.path() / "model").string(),
                                       "--metrics-port",
                                       "-1",
                                       "--distributed",
                                       "--dist-type",
                                       "ps",
                                       "--ps-count",
                                       "1",
                                       "--worker-count",
                                       "1",
                                       "--dist-start-port",
                                       std::to_string(cifar::testing::free_port()),
                                       "--insecure"};
  auto with_flag = ps;
  with_flag.insert(with_flag.end(), {"--tls-dir", (work.path() / "tls").string()});
  auto with_env = ps;
  with_env.insert(with_env.begin(), {"env", "CIFAR_TLS_DIR=" + (work.path() / "tls").string()});
  for (const auto& argv : {with_flag, with_env}) {
    const auto result = cifar::testing::run_process(argv);
    EXPECT_EQ(result.exit_code, 2) << result.output;
    EXPECT_NE(result.output.find("--insecure and --tls-dir " + (work.path() / "tls").string() +
                                 " (or CIFAR_TLS_DIR) contradict each other: give one of them"),
              std::string::npos)
        << result.output;
  }
  const auto log = work.path() / "ps.log";
  const cifar::testing::ChildProcess plaintext(ps, log);
  EXPECT_TRUE(cifar::testing::wait_for(
      [&] {
        return cifar::testing::read_file(log).find(
                   "the parameter-server channel is PLAINTEXT "
                   "(--insecure)") != std::string::npos;
      },
      std::chrono::seconds(30)))
      << cifar::testing::read_file(log);
}

// Exact wherever the tokens differ: first byte, last, length. That it takes the same time
// wherever they differ is by construction (it reads every byte of the expected token); a timing
// assertion here would only be noise.
TEST(PsDoorToken, TheComparisonIsExactWhereverTheTokensDiffer) {
  EXPECT_TRUE(equal_in_constant_time("Bearer abc", "Bearer abc"));
  EXPECT_FALSE(equal_in_constant_time("bearer abc", "Bearer abc"));
  EXPECT_FALSE(equal_in_constant_time("Bearer abd", "Bearer abc"));
  EXPECT_FALSE(equal_in_constant_time("Bearer ab", "Bearer abc"));
  EXPECT_FALSE(equal_in_constant_time("Bearer abcd", "Bearer abc"));
  EXPECT_FALSE(equal_in_constant_time("", "Bearer abc"));
}

}  // namespace
}  // namespace cifar::ps
