// A store known by a name, and DNS that does not answer for 10 s as a job starts: the cluster's
// CoreDNS stopped (SIGSTOP), so every lookup of every pod goes unanswered, as when a resolver is
// overloaded or cut off. The chief's first request to the store (it lists the run before any work)
// cannot resolve the name; that is waited out like any other store outage, and the job ends
// Succeeded with no restart and its last checkpoint in the bucket. EXCLUSIVE: no pod of the cluster
// has DNS meanwhile.
#include <gtest/gtest.h>
#include <sys/types.h>

#include <csignal>
#include <fstream>
#include <iostream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

#include "tests/e2e/object_storage_fixture.h"

namespace cifar::e2e {
namespace {

class StoreDns : public ObjectStorage {
 protected:
  void TearDown() override {
    answer_again();  // whatever failed, the cluster's DNS answers for the next cases
    ObjectStorage::TearDown();
  }

  // The cluster's CoreDNS (deploy/local-cluster/start.sh records its pid), stopped.
  void stop_answering() {
    std::ifstream pids(e2e_dir() / "cluster" / "pids");
    std::string line;
    while (std::getline(pids, line)) {
      std::istringstream fields(line);
      pid_t pid = 0;
      std::string name;
      if (fields >> pid >> name && name == "coredns") coredns_ = pid;
    }
    ASSERT_GT(coredns_, 0) << "no coredns in " << (e2e_dir() / "cluster" / "pids");
    ASSERT_EQ(::kill(coredns_, SIGSTOP), 0);
  }
  void answer_again() {
    if (coredns_ > 0) ::kill(coredns_, SIGCONT);
    coredns_ = 0;
  }

  pid_t coredns_ = 0;
};

TEST_F(StoreDns, AStoreNameThatDoesNotResolveFor10sIsWaitedForAndTheJobSucceedsWithNoRestart) {
  host_volume("cifar10", e2e_dir() / "cifar10-slice", true);
  checkpoint_every_steps_ = 4;
  store_service();
  endpoint_ = "https://" + store_dns_name() + endpoint_.substr(endpoint_.rfind(':'));
  checkpoint_store_ = store_fields("s3://checkpoints/e2e", "store-keys");

  stop_answering();
  const auto stopped = std::chrono::steady_clock::now();
  submit("s3dns", kPsSync, kPsReplicas, "", "cifar10", 2);  // the outage is before its first step
  // The chief met the silence: its store did not answer for want of the name.
  const std::regex unresolved("did not answer .*resolv", std::regex::icase);
  std::string log;
  EXPECT_TRUE(wait_for(
      [&] {
        log = kubectl({"logs", "s3dns-master-0", "-n", ns_}).output;
        return std::regex_search(log, unresolved);
      },
      seconds(60)))
      << log << diagnose("s3dns");
  std::smatch said;
  if (std::regex_search(log, said, std::regex("[^\n]*did not answer[^\n]*"))) {
    std::cout << "the chief said: " << said.str() << "\n";  // what a user reads in its log
  }
  std::this_thread::sleep_until(stopped + seconds(10));
  answer_again();

  ASSERT_TRUE(wait_for_state("s3dns", "Succeeded", seconds(400))) << diagnose("s3dns");
  const auto status = status_of("s3dns");
  EXPECT_EQ(status.value("restarts", -1), 0) << status.dump();
  expect_last_checkpoint_in_bucket(status);
}

}  // namespace
}  // namespace cifar::e2e
