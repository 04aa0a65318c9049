#include <gtest/gtest.h>

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "cli/options.h"
#include "tests/support/process.h"

namespace cifar::cli {
namespace {
using cifar::testing::run_process;
using cifar::testing::TempDir;

ParsedCommandLine parse(std::vector<std::string> args) {
  args.insert(args.begin(), "cifar-train");
  std::vector<const char*> argv;
  argv.reserve(args.size());
  for (const auto& a : args) argv.push_back(a.c_str());
  return parse_command_line(static_cast<int>(argv.size()), argv.data());
}

// The environment of a test, restored (unset) when it ends.
class ScopedEnv {
 public:
  void set(const char* name, const std::string& value) {
    ::setenv(name, value.c_str(), 1);
    names_.push_back(name);
  }
  ~ScopedEnv() {
    for (const auto* name : names_) ::unsetenv(name);
  }

 private:
  std::vector<const char*> names_;
};

// The chief alone writes the run (train/fence.h): in an all-reduce job it is rank 0, also where
// TF_CONFIG names workers only (there rank 1 is "worker 0", which in a PS job would be the chief).
TEST(CommandLine, TheChiefOfAnAllReduceJobIsRankZero) {
  for (const int rank : {0, 1}) {
    ScopedEnv env;
    env.set("TF_CONFIG", R"({"cluster": {"worker": ["w0:2222", "w1:2222"]}, "task": )"
                         R"({"type": "worker", "index": )" +
                             std::to_string(rank) + "}}");
    env.set("MASTER_ADDR", "w0");
    env.set("MASTER_PORT", "29500");
    env.set("WORLD_SIZE", "2");
    env.set("RANK", std::to_string(rank));
    const auto parsed = parse({"--strategy", "allreduce"});
    ASSERT_TRUE(parsed.config) << rank;
    EXPECT_EQ(parsed.config->distributed.chief(), rank == 0) << rank;
  }
  EXPECT_TRUE(parse({}).config->distributed.chief());  // training alone
}

// An elastic all-reduce job's flags: --min-ranks within the world, the settle time only with it,
// and a global batch of the largest world by default.
TEST(CommandLine, ElasticFlagsAreCheckedAgainstTheWorld) {
  ScopedEnv env;
  env.set("MASTER_ADDR", "127.0.0.1");
  env.set("MASTER_PORT", "29500");
  env.set("WORLD_SIZE", "4");
  env.set("RANK", "1");
  const auto elastic = parse({"--strategy", "allreduce", "--min-ranks", "2", "-b", "16"});
  ASSERT_TRUE(elastic.config);
  EXPECT_EQ(elastic.config->distributed.allreduce.min_world_size, 2);
  EXPECT_EQ(elastic.config->global_batch, 64);
  EXPECT_EQ(elastic.config->distributed.who(), "slot 1");
  EXPECT_EQ(parse({"--strategy", "allreduce", "--min-ranks", "5"}).exit_code, 2);
  EXPECT_EQ(parse({"--strategy", "allreduce", "--rendezvous-settle", "2"}).exit_code, 2);
  EXPECT_EQ(parse({"--strategy", "allreduce", "--global-batch", "3"}).exit_code, 2);  // < 4 ranks
  const auto fixed = parse({"--strategy", "allreduce", "-b", "16"});
  ASSERT_TRUE(fixed.config);
  EXPECT_EQ(fixed.config->global_batch, 0);  // batch x world, as before
  EXPECT_EQ(fixed.config->distributed.who(), "rank 1");
}

TEST(CommandLine, AcceptsTheSeedFlags) {
  const auto p = parse({"-m", "simplecnn", "-md", "model/simplecnn", "-nc", "10", "-e", "100", "-c",
                        "cpu", "-b", "64", "-n", "cifar10-simplecnn"});
  ASSERT_TRUE(p.config.has_value());
  EXPECT_EQ(p.config->model, "simplecnn");
  EXPECT_EQ(p.config->model_dir, "model/simplecnn");
  EXPECT_EQ(p.config->num_classes, 10);
  EXPECT_EQ(p.config->epochs, 100);
  EXPECT_EQ(p.config->device, "cpu");
  EXPECT_EQ(p.config->batch_size, 64);
  EXPECT_EQ(p.config->name, "cifar10-simplecnn");
}

// Past the command line a choice is an enum; on it, only its names (any case) are accepted.
TEST(CommandLine, ChoicesTakeTheirNamesAndBecomeEnums) {
  const auto p = parse({"--strategy", "PS", "--dist-backend", "gloo", "--ps-mode", "Async-Reply",
                        "--ps-wire-dtype", "bf16", "--optimizer", "adam", "--precision", "BF16"});
  ASSERT_TRUE(p.config.has_value());
  EXPECT_EQ(p.config->distributed.strategy, train::Strategy::kParameterServer);
  EXPECT_EQ(p.config->distributed.allreduce.backend, allreduce::Backend::kGloo);
  EXPECT_EQ(p.config->distributed.ps.mode, ps::Mode::kAsyncReply);
  EXPECT_EQ(p.config->distributed.ps.wire_dtype, ps::WireDType::kBf16);
  EXPECT_EQ(p.config->optimizer.kind, train::OptimizerKind::kAdam);
  EXPECT_EQ(p.config->precision, train::Precision::kBf16);
  EXPECT_EQ(parse({}).config->precision, train::Precision::kAuto);
  for (const char* value : {"3", "lockfree", ""}) {
    const auto bad = parse({"--ps-mode", value});
    EXPECT_FALSE(bad.config.has_value()) << value;
    EXPECT_EQ(bad.exit_code, 2) << value;
  }
}

TEST(CommandLine, ARepeatedOptionTakesItsLastValue) {
  const auto p = parse({"-e", "5", "--lr", "0.1", "-e", "7", "--lr", "0.3"});
  ASSERT_TRUE(p.config.has_value());
  EXPECT_EQ(p.config->epochs, 7);
  EXPECT_DOUBLE_EQ(p.config->schedule.base_lr, 0.3);
}

TEST(CommandLine, CudnnContextMeansCuda) {
  const auto p = parse({"--context", "cudnn"});
  ASSERT_TRUE(p.config.has_value());
  EXPECT_EQ(p.config->device, "cuda");
}

TEST(CommandLine, TrainingOptionsReachTheConfig) {
  const auto p = parse({"--optimizer", "adam", "--lr", "0.002", "--schedule", "onecycle",
                        "--weight-decay", "0", "--label-smoothing", "0.1", "--no-augment",
                        "--resume", "-nc=100", "-d", "cifar100", "--ps-stripes", "3"});
  ASSERT_TRUE(p.config.has_value());
  EXPECT_EQ(p.config->optimizer.kind, train::OptimizerKind::kAdam);
  EXPECT_DOUBLE_EQ(p.config->schedule.base_lr, 0.002);
  EXPECT_EQ(p.config->schedule.kind, train::ScheduleKind::kOneCycle);
  EXPECT_DOUBLE_EQ(p.config->label_smoothing, 0.1);
  EXPECT_FALSE(p.config->augment);
  EXPECT_TRUE(p.config->resume);
  EXPECT_EQ(p.config->num_classes, 100);
  EXPECT_EQ(p.config->distributed.ps.stripes, 3);
}

TEST(CommandLine, MetricsLingerIsOffByDefault) {
  const auto defaults = parse({});
  ASSERT_TRUE(defaults.config.has_value());
  EXPECT_EQ(defaults.config->metrics_linger, 0);
  const auto set = parse({"--metrics-linger", "30"});
  ASSERT_TRUE(set.config.has_value());
  EXPECT_EQ(set.config->metrics_linger, 30);
}

// Bad flags and values: a clear message, exit code 2, from the real binary.
struct BadUsage {
  std::vector<std::string> args;
  std::string message_part;
};

void PrintTo(const BadUsage& bad, std::ostream* os) {
  for (const auto& arg : bad.args) *os << arg << ' ';
}

class BadUsageTest : public ::testing::TestWithParam<BadUsage> {};

TEST_P(BadUsageTest, ExitsWithCode2AndSaysWhy) {
  // No metrics endpoint: those that get as far as serving one run side by side (ctest -j).
  std::vector<std::string> argv = {CIFAR_TRAIN_BIN, "--metrics-port", "-1"};
  argv.insert(argv.end(), GetParam().args.begin(), GetParam().args.end());
  const auto r = run_process(argv);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find(GetParam().message_part), std::string::npos) << r.output;
}

INSTANTIATE_TEST_SUITE_P(
    CommandLine, BadUsageTest,
    ::testing::Values(
        BadUsage{{"--no-such-flag"}, "--no-such-flag"}, BadUsage{{"-e", "0"}, "--epochs"},
        BadUsage{{"-b", "lots"}, "--batch-size"}, BadUsage{{"-m", "vgg99"}, "vgg99"},
        BadUsage{{"-c", "tpu"}, "tpu"}, BadUsage{{"--schedule", "sawtooth"}, "sawtooth"},
        BadUsage{{"--lr", "-1"}, "--lr"}, BadUsage{{"--precision", "fp8"}, "{auto,fp32,bf16,fp16}"},
        BadUsage{{"--metrics-linger", "-1"}, "--metrics-linger"},
        BadUsage{{"--ps-stripes", "5"}, "--ps-stripes"},
        BadUsage{{"--global-batch", "64"}, "--global-batch needs --strategy allreduce"},
        BadUsage{{"--min-ranks", "2"}, "--min-ranks needs --strategy allreduce"},
        BadUsage{{"-d", "fashion-mnist", "-nc", "7", "-md", "/nonexistent/x"},
                 "10 classes but -nc is 7"},
        BadUsage{{"-d", "cifar100", "-nc", "10", "--data-dir", "/nonexistent"},
                 "-nc must be 100 or 20"}),
    [](const ::testing::TestParamInfo<BadUsage>& param_info) {
      std::string name;
      for (const auto& arg : param_info.param.args) name += arg + "_";
      for (auto& ch : name) {
        if (std::isalnum(static_cast<unsigned char>(ch)) == 0) ch = '_';
      }
      return std::to_string(param_info.index) + "_" + name;
    });

#ifndef CIFAR_WITH_CUDA
TEST(CommandLine, CudaOnACpuBuildIsAClearError) {
  TempDir work;
  const auto r = run_process(
      {CIFAR_TRAIN_BIN, "-c", "cuda", "-d", "synthetic", "-md", (work.path() / "m").string()});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("no CUDA device"), std::string::npos) << r.output;
}
#endif

TEST(CommandLine, HelpListsTheSeedFlagsAndExitsZero) {
  const auto r = run_process({CIFAR_TRAIN_BIN, "--help"});
  EXPECT_EQ(r.exit_code, 0);
  for (const char* flag : {"--model", "-md", "-nc", "--epochs", "--context", "--batch-size",
                           "--resume", "--download", "--metrics-port"}) {
    EXPECT_NE(r.output.find(flag), std::string::npos) << flag;
  }
}

// Bad data reaches the user as one clear line naming the file, exit code 1.
TEST(CommandLine, MissingDataDirectoryIsNamedWithADownloadHint) {
  TempDir work;
  const auto r = run_process({CIFAR_TRAIN_BIN, "-d", "cifar10", "--data-dir",
                              (work.path() / "nothing-here").string(), "-md",
                              (work.path() / "m").string(), "--metrics-port", "-1"});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("nothing-here"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--download"), std::string::npos) << r.output;
}

TEST(CommandLine, MissingDataFileIsNamed) {
  TempDir work;
  std::filesystem::create_directories(work.path() / "cifar");
  const auto r =
      run_process({CIFAR_TRAIN_BIN, "-d", "cifar10", "--data-dir", (work.path() / "cifar").string(),
                   "-md", (work.path() / "m").string(), "--metrics-port", "-1"});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("data_batch_1.bin"), std::string::npos) << r.output;
}

TEST(CommandLine, TruncatedDataNamesTheFileAndOffset) {
  TempDir work;
  const auto data = work.path() / "cifar";
  std::filesystem::create_directories(data);
  for (const char* name : {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
                           "data_batch_4.bin", "data_batch_5.bin", "test_batch.bin"}) {
    std::ofstream out(data / name, std::ios::binary);
    const std::string record(3073, '\x01');
    out << record << record;
  }
  std::filesystem::resize_file(data / "data_batch_3.bin", 3073 + 1000);
  const auto r = run_process({CIFAR_TRAIN_BIN, "-d", "cifar10", "--data-dir", data.string(), "-md",
                              (work.path() / "m").string(), "--metrics-port", "-1"});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("data_batch_3.bin"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("3073"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace cifar::cli
