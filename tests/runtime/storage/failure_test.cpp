// Which store failures are waited out and which are said at once (storage::classify): the table
// an S3 user lives with, and directory stores whose concurrent writers each publish a whole file.
#include <curl/curl.h>
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "storage/directory_store.h"
#include "storage/s3_client.h"
#include "tests/support/process.h"

namespace cifar::storage {
namespace {

TEST(StoreFailures, WhatIsAwayIsTransientAndWhatRefusesIsPermanent) {
  struct Case {
    int curl;
    long status;
    const char* code;
    Failure want;
  };
  const std::vector<Case> cases = {
      {CURLE_COULDNT_CONNECT, 0, "", Failure::kTransient},       // refused: a restart, a failover
      {CURLE_COULDNT_RESOLVE_HOST, 0, "", Failure::kTransient},  // DNS away
      {CURLE_OPERATION_TIMEDOUT, 0, "", Failure::kTransient},    // silent, or stalled
      {CURLE_RECV_ERROR, 0, "", Failure::kTransient},            // reset
      {CURLE_GOT_NOTHING, 0, "", Failure::kTransient},
      {CURLE_HTTP2, 0, "", Failure::kTransient},  // a TLS store stopped mid-request (HTTP/2)
      {CURLE_HTTP2_STREAM, 0, "", Failure::kTransient},
      {CURLE_OK, 500, "InternalError", Failure::kTransient},
      {CURLE_OK, 503, "SlowDown", Failure::kTransient},
      {CURLE_OK, 503, "ServiceUnavailable", Failure::kTransient},
      {CURLE_OK, 429, "", Failure::kTransient},
      {CURLE_OK, 400, "RequestTimeout", Failure::kTransient},
      {CURLE_OK, 403, "AccessDenied", Failure::kPermanent},
      {CURLE_OK, 403, "InvalidAccessKeyId", Failure::kPermanent},
      {CURLE_OK, 403, "SignatureDoesNotMatch", Failure::kPermanent},
      {CURLE_OK, 404, "NoSuchBucket", Failure::kPermanent},
      {CURLE_OK, 400, "InvalidBucketName", Failure::kPermanent},
      {CURLE_PEER_FAILED_VERIFICATION, 0, "", Failure::kPermanent},  // a certificate not trusted
      {CURLE_UNSUPPORTED_PROTOCOL, 0, "", Failure::kPermanent},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(classify(c.curl, c.status, c.code), c.want)
        << "curl " << c.curl << ", HTTP " << c.status << " " << c.code;
  }
}

// A fenced-out chief and its replacement both rewriting monitor.jsonl: each write goes through a
// temporary file of its own, so whatever is read, and what is left, is one writer's whole file.
TEST(DirectoryStoreWriters, TwoWritersOfOneNameEachPublishAWholeFile) {
  testing::TempDir dir;
  DirectoryStore store(dir.path());
  const std::string a(1 << 20, 'a');
  const std::string b(1 << 20, 'b');
  std::atomic<bool> writing{true};
  std::atomic<int> torn{0};
  std::atomic<int> reads{0};
  std::thread reader([&] {
    while (writing) {
      if (const auto got = store.get("monitor.jsonl")) {
        reads += 1;
        if (*got != a && *got != b) torn += 1;
      }
    }
  });
  const auto writer = [&](const std::string& bytes) {
    for (int i = 0; i < 40; ++i) store.put("monitor.jsonl", bytes);
  };
  std::thread first(writer, a);
  std::thread second(writer, b);
  first.join();
  second.join();
  writing = false;
  reader.join();
  EXPECT_EQ(torn, 0) << "of " << reads << " reads";
  EXPECT_GT(reads, 0);
  const auto last = store.get("monitor.jsonl");
  ASSERT_TRUE(last);
  EXPECT_TRUE(*last == a || *last == b);
  // Every temporary file was renamed into place: nothing else is left.
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    files.push_back(entry.path().filename().string());
  }
  EXPECT_EQ(files, std::vector<std::string>{"monitor.jsonl"});
}

}  // namespace
}  // namespace cifar::storage
