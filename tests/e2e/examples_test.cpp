// The examples a user applies as written, on the cluster as `make cluster` sets it up:
// deploy/examples/s3-ps-job.yaml against the store `make cluster S3=1` starts
// (deploy/local-cluster/object-store.sh, with the CIFAR-10 slice in place of the whole set), its
// Secret made by the command that script prints. Data and checkpoints in the bucket, no volume.
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "tests/e2e/cluster_fixture.h"

namespace cifar::e2e {
namespace {

namespace fs = std::filesystem;

class Examples : public Cluster {
 protected:
  void TearDown() override {
    Cluster::TearDown();
    if (store_started_) {
      run_process(
          {(fs::path(CIFAR_SOURCE_DIR) / "deploy/object-store/stop.sh").string(), store_.string()});
    }
  }

  // The local cluster's store, as `make cluster S3=1` starts it, with `data`'s files under
  // s3://checkpoints/data/cifar10; the Secret the example names, as the script says to make it.
  // One run directory for every run of the case: a store that a run killed by its timeout left
  // on the fixed address is stopped first.
  void cluster_store(const fs::path& data) {
    store_ = e2e_dir() / "example-object-store";
    run_process(
        {(fs::path(CIFAR_SOURCE_DIR) / "deploy/object-store/stop.sh").string(), store_.string()});
    const auto started =
        run_process({(fs::path(CIFAR_SOURCE_DIR) / "deploy/local-cluster/object-store.sh").string(),
                     store_.string(), data.string()});
    ASSERT_EQ(started.exit_code, 0) << started.output;
    store_started_ = true;
    const auto said = started.output.find("then: kubectl create secret generic");
    ASSERT_NE(said, std::string::npos) << started.output;
    const auto made = kubectl({"create", "secret", "generic", "checkpoint-store-keys", "-n", ns_,
                               "--from-env-file=" + (store_ / "credentials.env").string()});
    ASSERT_EQ(made.exit_code, 0) << made.output;
  }

  fs::path store_;
  bool store_started_ = false;
};

TEST_F(Examples, TheObjectStorageExampleSucceedsAsWrittenWithNoVolume) {
  cluster_store(e2e_dir() / "cifar10-slice" / "cifar-10-batches-bin");
  const auto example = fs::path(CIFAR_SOURCE_DIR) / "deploy/examples/s3-ps-job.yaml";
  const std::string job = "cifar10-ps-s3";
  jobs_.push_back(job);
  const auto applied = kubectl({"apply", "-n", ns_, "-f", example.string()});
  ASSERT_EQ(applied.exit_code, 0) << applied.output;
  // Every pod that reads data fetched it from the bucket (the PS reads none); read while the pods
  // are there (a job that ended deletes them).
  std::map<std::string, std::string> logs;
  const std::vector<std::string> readers = {"master-0", "worker-0", "worker-1", "evaluator-0"};
  const std::string fetched = "dataset s3://checkpoints/data/cifar10: 6 file(s) fetched";
  EXPECT_TRUE(wait_for(
      [&] {
        size_t seen = 0;
        for (const auto& role : readers) {
          if (logs[role].find(fetched) == std::string::npos) {
            logs[role] = kubectl({"logs", job + "-" + role, "-n", ns_}).output;
          }
          seen += logs[role].find(fetched) != std::string::npos ? 1 : 0;
        }
        return seen == readers.size();
      },
      seconds(180)))
      << ::testing::PrintToString(logs) << diagnose(job);
  EXPECT_TRUE(wait_for_state(job, "Succeeded", seconds(300))) << diagnose(job);
  const auto status = status_of(job);
  EXPECT_EQ(status.value("modelDir", "").rfind("s3://checkpoints/runs/" + ns_ + "/" + job + "-", 0),
            0U)
      << status.dump();
  EXPECT_GT(status["progress"].value("testAccuracy", 0.0), 0) << status.dump();
  EXPECT_EQ(kubectl({"get", "pvc", "-n", ns_, "-o", "name"}).output, "");
}

}  // namespace
}  // namespace cifar::e2e
