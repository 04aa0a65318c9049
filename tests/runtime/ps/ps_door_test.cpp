// The PS's door (distributed/ps/token_auth.h) on a real cifar-train PS process: a push without
// the job's token is refused before the server reads its payload, so a 256 MB push costs the PS
// its headers, not 256 MB; the same push with the token is read (the measurement can tell).
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <fstream>
#include <future>
#include <iostream>
#include <string>

#include "distributed/ps/token_auth.h"
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

TEST(PsDoor, AnUnauthenticatedOversizedPushIsRefusedBeforeItsPayloadIsRead) {
  TempDir work;
  const int port = cifar::testing::free_port();
  ::setenv("CIFAR_PS_TOKEN", "the-jobs-token", 1);
  ChildProcess ps({CIFAR_TRAIN_BIN, "-m", "simplecnn", "-md", (work.path() / "model").string(),
                   "--metrics-port", "-1", "--distributed", "--dist-type", "ps", "--ps-count", "1",
                   "--worker-count", "1", "--dist-start-port", std::to_string(port)},
                  work.path() / "ps.log");
  ::unsetenv("CIFAR_PS_TOKEN");
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(-1);
  const auto channel = grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port),
                                                 grpc::InsecureChannelCredentials(), args);
  ASSERT_TRUE(channel->WaitForConnected(std::chrono::system_clock::now() + 30s))
      << cifar::testing::read_file(work.path() / "ps.log");

  constexpr size_t kPush = size_t{256} << 20;
  const auto before = peak_rss_mb(ps.pid());
  for (const auto* token : {"", "a-guess"}) {
    const auto refused = push_bytes(channel, kPush, token);
    EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAUTHENTICATED) << refused.error_message();
    EXPECT_EQ(refused.error_message(), kTokenRefusal);
  }
  const auto after_refusals = peak_rss_mb(ps.pid());
  EXPECT_LT(after_refusals - before, 32)
      << "the PS read a refused push: " << before << " MB -> " << after_refusals << " MB";

  // With the token the same bytes get in, are read, and are refused as no PushRequest: the
  // measurement sees a read payload.
  const auto read = push_bytes(channel, kPush, "the-jobs-token");
  EXPECT_NE(read.error_code(), grpc::StatusCode::UNAUTHENTICATED) << read.error_message();
  EXPECT_FALSE(read.ok());
  const auto after_read = peak_rss_mb(ps.pid());
  std::cout << "PS peak RSS: " << before << " MB, after two refused 256 MB pushes "
            << after_refusals << " MB, after one admitted " << after_read << " MB\n";
  EXPECT_GT(after_read - after_refusals, 200);
  EXPECT_TRUE(ps.running());  // and it kept serving
}

TEST(PsDoor, TheTokenComparisonIsExactAndIndependentOfWhereItDiffers) {
  EXPECT_TRUE(equal_in_constant_time("Bearer abc", "Bearer abc"));
  EXPECT_FALSE(equal_in_constant_time("Bearer abd", "Bearer abc"));
  EXPECT_FALSE(equal_in_constant_time("Bearer ab", "Bearer abc"));
  EXPECT_FALSE(equal_in_constant_time("Bearer abcd", "Bearer abc"));
  EXPECT_FALSE(equal_in_constant_time("", "Bearer abc"));
}

}  // namespace
}  // namespace cifar::ps
