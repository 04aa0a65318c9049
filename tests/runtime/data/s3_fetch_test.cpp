// A CIFAR dataset in object storage (data/s3_fetch.h), against the real S3-compatible server the
// tests share (SeaweedFS): fetched once, read as the local files; a partial copy resumed, a
// replaced object fetched again; bad input (no files, a truncated file, wrong keys) refused naming
// the object and the store's code; and cifar-train --data-uri training on it.
#include "data/s3_fetch.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "data/dataset.h"
#include "tests/runtime/data/test_util.h"
#include "tests/support/object_store.h"
#include "tests/support/process.h"
#include "tests/support/train_args.h"

namespace cifar::data {
namespace {

namespace fs = std::filesystem;
using cifar::testing::ObjectStore;
using testing::expect_data_error;
using testing::make_dataset;
using testing::read_bytes;
using testing::TempDir;
constexpr const char* kBucket = ObjectStore::kBucket;

class DatasetInObjectStorage : public ::testing::Test {
 protected:
  [[nodiscard]] storage::S3ClientOptions options() const {
    storage::S3ClientOptions options;
    options.endpoint = server_.endpoint;
    options.credentials = {server_.access_key_id, server_.secret_access_key};
    options.first_backoff = std::chrono::milliseconds(10);
    return options;
  }

  // CIFAR-10 files of `records` records each (file i's bytes differ from file j's) written locally
  // to `local` and as objects under `prefix`/`top_dir`.
  void put_cifar10(const std::string& prefix, const std::string& top_dir, int records,
                   const fs::path& local) {
    fs::create_directories(local);
    int seed = 0;
    for (const auto& file : cifar_layout("cifar10").files) {
      ++seed;
      write_cifar10_file(local / file,
                         make_dataset(records, 3, 32, 32, 10, [seed](int64_t i, int64_t k) {
                           return static_cast<uint8_t>((i * 31 + k * seed) & 0xFFU);
                         }));
      const auto bytes = read_bytes(local / file);
      client_.put(kBucket, key(prefix, top_dir.empty() ? file : top_dir + "/" + file),
                  std::string(bytes.begin(), bytes.end()));
    }
  }

  [[nodiscard]] std::string key(const std::string& prefix, const std::string& name) const {
    return prefix_ + "/" + prefix + "/" + name;
  }
  [[nodiscard]] storage::S3Location location(const std::string& prefix) const {
    return storage::parse_s3_uri(std::string("s3://") + kBucket + "/" + prefix_ + "/" + prefix);
  }

  const ObjectStore server_ = ObjectStore::from_fixture();
  const std::string prefix_ = cifar::testing::unique_prefix("s3-dataset");
  storage::S3Client client_{options()};
};

void expect_same_sets(const TrainTest& a, const TrainTest& b) {
  EXPECT_EQ(a.train.labels, b.train.labels);
  EXPECT_EQ(a.train.images, b.train.images);
  EXPECT_EQ(a.test.labels, b.test.labels);
  EXPECT_EQ(a.test.images, b.test.images);
}

TEST_F(DatasetInObjectStorage, IsFetchedOnceInRangesAndReadsAsTheLocalFiles) {
  TempDir work;
  put_cifar10("c10", "cifar-10-batches-bin", 7, work / "local");
  FetchOptions small_ranges;
  small_ranges.range_bytes = 5000;  // 7 records of 3073 bytes: five ranged GETs a file, 4 at once
  const auto first =
      fetch_dataset(client_, location("c10"), "cifar10", work / "cache", small_ranges);
  EXPECT_EQ(first.fetched, 6);
  EXPECT_EQ(first.reused, 0);
  EXPECT_EQ(first.bytes, 6 * 7 * 3073);
  expect_same_sets(read_cifar10(work / "cache"), read_cifar10(work / "local"));
  // A second run (a restarted container) moves nothing.
  const auto again = fetch_dataset(client_, location("c10"), "cifar10", work / "cache");
  EXPECT_EQ(again.fetched, 0);
  EXPECT_EQ(again.reused, 6);
  EXPECT_EQ(again.bytes, 0);
}

// The processes of a job on one machine share its data directory: one fetches, the others wait
// for it and find the files there (a lock on the directory), and every copy is whole.
TEST_F(DatasetInObjectStorage, ProcessesSharingADirectoryFetchItOnce) {
  TempDir work;
  put_cifar10("c10", "", 9, work / "local");
  FetchOptions small_ranges;
  small_ranges.range_bytes = 4000;
  std::vector<FetchReport> reports(3);
  std::vector<std::thread> fetchers;
  for (auto& report : reports) {
    fetchers.emplace_back([&] {
      storage::S3Client own(options());  // each its own connections, as processes have
      report = fetch_dataset(own, location("c10"), "cifar10", work / "shared", small_ranges);
    });
  }
  for (auto& fetcher : fetchers) fetcher.join();
  int fetched = 0;
  int reused = 0;
  for (const auto& report : reports) {
    fetched += report.fetched;
    reused += report.reused;
  }
  EXPECT_EQ(fetched, 6);
  EXPECT_EQ(reused, 12);
  expect_same_sets(read_cifar10(work / "shared"), read_cifar10(work / "local"));
}

TEST_F(DatasetInObjectStorage, APartialCopyIsResumedAndAReplacedObjectFetchedAgain) {
  TempDir work;
  put_cifar10("c10", "", 5, work / "local");  // the files directly under the prefix
  const auto cache = work / "cache";
  ASSERT_EQ(fetch_dataset(client_, location("c10"), "cifar10", cache).fetched, 6);
  // An interrupted fetch of test_batch.bin: its first 4000 bytes, the object's ETag beside them.
  const auto whole = read_bytes(cache / "test_batch.bin");
  const auto etag = cifar::testing::read_file(cache / ".test_batch.bin.etag");
  fs::remove(cache / "test_batch.bin");
  testing::write_bytes(cache / "test_batch.bin.partial",
                       std::vector<uint8_t>(whole.begin(), whole.begin() + 4000));
  { std::ofstream(cache / ".test_batch.bin.partial.etag") << etag; }
  const auto resumed = fetch_dataset(client_, location("c10"), "cifar10", cache);
  EXPECT_EQ(resumed.fetched, 1);
  EXPECT_EQ(resumed.reused, 5);
  EXPECT_EQ(resumed.resumed, 4000);
  EXPECT_EQ(resumed.bytes, static_cast<int64_t>(whole.size()) - 4000);
  EXPECT_EQ(read_bytes(cache / "test_batch.bin"), whole);
  EXPECT_FALSE(fs::exists(cache / "test_batch.bin.partial"));

  // A partial copy whose bytes went bad on the disk: the MD5 (the resumed bytes' too) is not the
  // ETag, the copy is removed, and the next fetch brings the file whole.
  fs::remove(cache / "test_batch.bin");
  testing::write_bytes(cache / "test_batch.bin.partial", std::vector<uint8_t>(4000, 7));
  { std::ofstream(cache / ".test_batch.bin.partial.etag") << etag; }
  expect_data_error([&] { fetch_dataset(client_, location("c10"), "cifar10", cache); },
                    {"test_batch.bin arrived changed: its MD5 is not its ETag"});
  EXPECT_FALSE(fs::exists(cache / "test_batch.bin.partial"));
  EXPECT_EQ(fetch_dataset(client_, location("c10"), "cifar10", cache).fetched, 1);
  EXPECT_EQ(read_bytes(cache / "test_batch.bin"), whole);

  // data_batch_2.bin replaced in the store (another version: another ETag): fetched again.
  write_cifar10_file(work / "new.bin", make_dataset(3));
  const auto replacement = read_bytes(work / "new.bin");
  client_.put(kBucket, key("c10", "data_batch_2.bin"),
              std::string(replacement.begin(), replacement.end()));
  const auto after = fetch_dataset(client_, location("c10"), "cifar10", cache);
  EXPECT_EQ(after.fetched, 1);
  EXPECT_EQ(after.reused, 5);
  EXPECT_EQ(read_bytes(cache / "data_batch_2.bin"), replacement);
}

TEST_F(DatasetInObjectStorage, BadInputFailsNamingTheObjectAndTheStoresCode) {
  TempDir work;
  // Nothing under the prefix: for good (DatasetUnavailable: no restart would change it).
  EXPECT_THROW(fetch_dataset(client_, location("none"), "cifar10", work / "a"), DatasetUnavailable);
  expect_data_error([&] { fetch_dataset(client_, location("none"), "cifar10", work / "a"); },
                    {"no object data_batch_1.bin (nor cifar-10-batches-bin/data_batch_1.bin)",
                     "0 objects there"});
  // One file cut short: refused from the listing, before a byte moved.
  put_cifar10("short", "", 2, work / "local");
  const auto bytes = read_bytes(work / "local" / "data_batch_3.bin");
  client_.put(kBucket, key("short", "data_batch_3.bin"),
              std::string(bytes.begin(), bytes.end() - 100));
  expect_data_error(
      [&] { fetch_dataset(client_, location("short"), "cifar10", work / "b"); },
      {"dataset object s3://" + std::string(kBucket) + "/" + key("short", "data_batch_3.bin"),
       "has 6046 bytes, not a whole number of 3073-byte records"});
  EXPECT_FALSE(fs::exists(work / "b" / "data_batch_1.bin"));
  // More records than the official file holds (a test_batch.bin of 10001): not this dataset's.
  put_cifar10("long", "", 1, work / "long");
  client_.put(kBucket, key("long", "test_batch.bin"), std::string(10001 * 3073, '\1'));
  expect_data_error([&] { fetch_dataset(client_, location("long"), "cifar10", work / "d"); },
                    {"/" + key("long", "test_batch.bin") +
                     " has 10001 records, more than the "
                     "10000 of test_batch.bin"});
  // Wrong keys: the store's code, never the secret.
  auto wrong = options();
  wrong.credentials.secret_access_key = "not-the-secret-of-this-store";
  storage::S3Client refused(wrong);
  try {
    fetch_dataset(refused, location("short"), "cifar10", work / "c");
    ADD_FAILURE() << "no DataError";
  } catch (const DataError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("dataset " + location("short").uri() + " cannot be listed"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("[SignatureDoesNotMatch]"), std::string::npos) << message;
    EXPECT_EQ(message.find(wrong.credentials.secret_access_key), std::string::npos) << message;
  }
}

// A store away when the fetch starts (stopped: connections refused, as in a restart or failover)
// is waited for, the fetch trying again with a backoff, and it completes once the store is back;
// away for longer than the fetch waits, a DataError says for how long (exit 1: the restart
// resumes).
TEST(DatasetInAStoreThatIsAway, IsWaitedForAndFetchedOnceItIsBack) {
  TempDir work;
  cifar::testing::OwnObjectStore store(work / "store");
  storage::S3ClientOptions options;
  options.endpoint = store.access().endpoint;
  options.credentials = {store.access().access_key_id, store.access().secret_access_key};
  options.first_backoff = std::chrono::milliseconds(10);
  storage::S3Client client(options);
  write_cifar10_file(work / "file.bin", make_dataset(3));
  const auto bytes = read_bytes(work / "file.bin");
  for (const auto& file : cifar_layout("cifar10").files) {
    client.put(kBucket, "c10/" + file, std::string(bytes.begin(), bytes.end()));
  }
  const auto from = storage::parse_s3_uri(std::string("s3://") + kBucket + "/c10");

  store.stop();
  FetchOptions briefly;
  briefly.patience = std::chrono::seconds(3);
  const auto given_up = std::chrono::steady_clock::now();
  expect_data_error([&] { fetch_dataset(client, from, "cifar10", work / "a", briefly); },
                    {"dataset s3://" + std::string(kBucket) + "/c10 cannot be listed", "transient]",
                     "longer than the fetch waits (3 s)"});
  EXPECT_GE(std::chrono::steady_clock::now() - given_up, std::chrono::seconds(1));

  std::thread restart([&] {
    std::this_thread::sleep_for(std::chrono::seconds(6));
    store.start();
  });
  const auto waited = std::chrono::steady_clock::now();
  FetchReport report;
  EXPECT_NO_THROW(report = fetch_dataset(client, from, "cifar10", work / "b"));
  restart.join();
  EXPECT_GE(std::chrono::steady_clock::now() - waited, std::chrono::seconds(6));
  EXPECT_EQ(report.fetched, 6);
  EXPECT_EQ(read_bytes(work / "b" / "test_batch.bin"), bytes);
}

// The command line: -d cifar10 --data-uri s3://... with the store's settings in the environment,
// as the checkpoints' (AWS_ENDPOINT_URL, the keys); the data lands in --data-dir.
TEST_F(DatasetInObjectStorage, CifarTrainTrainsOnItWithTheStoresUsualSettings) {
  TempDir work;
  put_cifar10("run", "cifar-10-batches-bin", 64, work / "local");
  server_.export_environment();
  const auto uri = location("run").uri();
  const auto result = cifar::testing::run_process(
      cifar::testing::TrainArgs({CIFAR_TRAIN_BIN})
          .dirs(work.path(), "model")
          .single_threaded()
          .no_metrics_server()
          .add({"-m", "simplecnn", "-d", "cifar10", "-nc", "10", "-e", "1", "-b", "32",
                "--data-uri", uri, "--data-dir", (work / "fetched").string()})
          .args());
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("dataset " + uri + ": 6 file(s) fetched"), std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("cifar10: 320 training and 64 test images"), std::string::npos)
      << result.output;
  expect_same_sets(read_cifar10(work / "fetched"), read_cifar10(work / "local"));

  // Nothing under the prefix: exit 6 (contract::kExitDataUnavailable), which no restart retries.
  const auto missing = cifar::testing::run_process(
      cifar::testing::TrainArgs({CIFAR_TRAIN_BIN})
          .dirs(work.path(), "model2")
          .no_metrics_server()
          .add({"-m", "simplecnn", "-d", "cifar10", "--data-uri", location("none").uri(),
                "--data-dir", (work / "none").string()})
          .args());
  EXPECT_EQ(missing.exit_code, 6) << missing.output;
  EXPECT_NE(missing.output.find("data: dataset " + location("none").uri() +
                                ": no object data_batch_1.bin"),
            std::string::npos)
      << missing.output;

  const auto refused = cifar::testing::run_process(
      {CIFAR_TRAIN_BIN, "-d", "cifar10", "--data-uri", uri, "--download"});
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.output.find("--download excludes --data-uri"), std::string::npos)
      << refused.output;
}

}  // namespace
}  // namespace cifar::data
