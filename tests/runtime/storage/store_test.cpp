// The Store contract, on both backends: a directory, and a bucket of a real S3-compatible server
// (SeaweedFS, tests/support/object_store.h), each case under a prefix of its own.
#include "storage/store.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "storage/directory_store.h"
#include "storage/s3_store.h"
#include "tests/support/object_store.h"
#include "tests/support/process.h"

namespace cifar::storage::store_test {

using testing::ObjectStore;
using testing::unique_prefix;

S3ClientOptions options_for(const ObjectStore& server) {
  S3ClientOptions options;
  options.endpoint = server.endpoint;
  options.credentials = {server.access_key_id, server.secret_access_key};
  return options;
}

S3Location location(const std::string& prefix) {
  return parse_s3_uri(std::string("s3://") + ObjectStore::kBucket + "/" + prefix);
}

enum class Backend { kDirectory, kS3 };

class StoreContract : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    if (GetParam() == Backend::kDirectory) {
      store_ = std::make_unique<DirectoryStore>(dir_.path() / "run");
    } else {
      prefix_ = unique_prefix("store-contract") + "/run";
      store_ =
          std::make_unique<S3Store>(location(prefix_), options_for(ObjectStore::from_fixture()));
    }
  }

  testing::TempDir dir_;
  std::string prefix_;
  std::unique_ptr<Store> store_;
};

TEST_P(StoreContract, WhatIsPutIsGotBackListedInOrderAndRemoved) {
  EXPECT_EQ(store_->get("a-step-2.pt"), std::nullopt);
  EXPECT_TRUE(store_->list("a-").empty());
  const std::string binary("\0\x01\xff zip", 8);
  store_->put("a-step-2.pt", binary);
  store_->put("a-step-1.pt", "one");
  store_->put("b.done", "{}");
  EXPECT_EQ(store_->get("a-step-2.pt"), binary);
  EXPECT_EQ(store_->list("a-"), (std::vector<std::string>{"a-step-1.pt", "a-step-2.pt"}));
  EXPECT_EQ(store_->list(""), (std::vector<std::string>{"a-step-1.pt", "a-step-2.pt", "b.done"}));
  store_->put("a-step-1.pt", "replaced");
  EXPECT_EQ(store_->get("a-step-1.pt"), "replaced");
  store_->remove("a-step-1.pt");
  store_->remove("never-there");
  EXPECT_EQ(store_->list("a-"), (std::vector<std::string>{"a-step-2.pt"}));
}

TEST_P(StoreContract, PutIfWritesOnlyOverTheVersionItWasGiven) {
  EXPECT_TRUE(store_->put_if("run.fence", "1", std::nullopt));
  EXPECT_FALSE(store_->put_if("run.fence", "2", std::nullopt));  // someone was first
  const auto first = store_->get_versioned("run.fence");
  ASSERT_TRUE(first);
  EXPECT_EQ(first->bytes, "1");
  EXPECT_TRUE(store_->put_if("run.fence", "3", first->version));
  EXPECT_FALSE(store_->put_if("run.fence", "4", first->version));  // overtaken since
  EXPECT_EQ(store_->get("run.fence"), "3");
}

TEST_P(StoreContract, ItsLocationNamesWhereObjectsAre) {
  const auto where = store_->location_of("x.pt");
  EXPECT_EQ(where.substr(0, store_->location().size()), store_->location());
  EXPECT_NE(where.find("x.pt"), std::string::npos);
  if (GetParam() == Backend::kS3) {
    EXPECT_EQ(where, location(prefix_).uri() + "/x.pt");
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, StoreContract,
                         ::testing::Values(Backend::kDirectory, Backend::kS3),
                         [](const ::testing::TestParamInfo<Backend>& backend) {
                           return backend.param == Backend::kDirectory ? "Directory" : "S3";
                         });

TEST(S3StoreListing, LeavesOutObjectsOfOtherPrefixesAndDeeperPaths) {
  const auto options = options_for(ObjectStore::from_fixture());
  const auto runs = unique_prefix("listing");
  S3Store run(location(runs + "/a"), options);
  S3Store sibling(location(runs + "/ab"), options);
  S3Store nested(location(runs + "/a/old"), options);
  run.put("x-step-1.pt", "1");
  sibling.put("x-step-2.pt", "2");
  nested.put("x-step-3.pt", "3");
  EXPECT_EQ(run.list(""), (std::vector<std::string>{"x-step-1.pt"}));
  EXPECT_EQ(nested.list(""), (std::vector<std::string>{"x-step-3.pt"}));
}

}  // namespace cifar::storage::store_test
