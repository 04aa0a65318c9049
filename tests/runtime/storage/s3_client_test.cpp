// The S3 client against a real S3-compatible server (SeaweedFS): multipart uploads, and what a
// user sees when the store is not right: wrong keys, a missing bucket, an endpoint that does not
// answer or resolve, a server that throttles (503 SlowDown, through tests/support/flaky_proxy.h).
#include "storage/s3_client.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "tests/support/flaky_proxy.h"
#include "tests/support/object_store.h"
#include "tests/support/process.h"

namespace cifar::storage::s3_client_test {

using testing::ObjectStore;
constexpr const char* kBucket = ObjectStore::kBucket;

class S3ClientAgainstServer : public ::testing::Test {
 protected:
  [[nodiscard]] S3ClientOptions options() const {
    S3ClientOptions options;
    options.endpoint = server_.endpoint;
    options.credentials = {server_.access_key_id, server_.secret_access_key};
    options.first_backoff = std::chrono::milliseconds(10);
    return options;
  }

  // The S3Error `call` throws; fails the test if it throws none.
  template <typename Call>
  static S3Error error_of(Call call) {
    try {
      call();
    } catch (const S3Error& e) {
      return e;
    }
    ADD_FAILURE() << "no S3Error";
    return {"", -1, ""};
  }

  // A key of this case's own in the shared bucket.
  [[nodiscard]] std::string key(const std::string& name) const { return prefix_ + "/" + name; }

  const ObjectStore server_ = ObjectStore::from_fixture();
  const std::string prefix_ = testing::unique_prefix("s3-client");
};

TEST_F(S3ClientAgainstServer, AnObjectAboveTheThresholdGoesInPartsAndComesBackWhole) {
  auto opts = options();
  opts.multipart_threshold = size_t{6} << 20;
  opts.part_size = size_t{5} << 20;
  S3Client client(opts);
  std::string body(size_t{13} << 20, '\0');  // three parts, the last one short
  for (size_t i = 0; i < body.size(); ++i) body[i] = static_cast<char>((i * 2654435761U) >> 13);
  client.put(kBucket, key("model.pt"), body);
  EXPECT_EQ(client.get(kBucket, key("model.pt")), body);
  const auto listed = client.list(kBucket, key(""));
  ASSERT_EQ(listed.size(), 1U);
  EXPECT_EQ(listed[0].size, static_cast<int64_t>(body.size()));
}

// A ranged GET returns those bytes and no others; a range past the end is the store's refusal. A
// listing carries each object's ETag: a single PUT's is the MD5 of its bytes.
TEST_F(S3ClientAgainstServer, ARangedGetReturnsThatRangeAndAListingTheETags) {
  S3Client client(options());
  const std::string body = "0123456789abcdefghij";
  client.put(kBucket, key("range"), body);
  EXPECT_EQ(client.get_range(kBucket, key("range"), 0, 5), "01234");
  EXPECT_EQ(client.get_range(kBucket, key("range"), 15, 5), "fghij");
  const auto past = error_of([&] { client.get_range(kBucket, key("range"), 30, 5); });
  EXPECT_EQ(past.http_status(), 416);
  EXPECT_FALSE(past.transient());
  // Of a version (If-Match): another's ETag is refused, 412.
  EXPECT_EQ(client.get_range(kBucket, key("range"), 5, 5, "644be06dfc54061fd1e67f5ebbabcd58"),
            "56789");
  const auto other = error_of(
      [&] { client.get_range(kBucket, key("range"), 0, 5, "00000000000000000000000000000000"); });
  EXPECT_EQ(other.http_status(), 412);
  const auto listed = client.list(kBucket, key("range"));
  ASSERT_EQ(listed.size(), 1U);
  EXPECT_EQ(listed[0].etag, "644be06dfc54061fd1e67f5ebbabcd58");  // md5sum of `body`
}

TEST_F(S3ClientAgainstServer, AListingOfManyPagesIsWholeAndInKeyOrder) {
  auto opts = options();
  opts.list_page_size = 4;  // pages without writing a thousand objects
  S3Client client(opts);
  for (int i = 14; i >= 0; --i) client.put(kBucket, key("p/" + std::to_string(100 + i)), "x");
  client.put(kBucket, key("q/100"), "x");
  const auto listed = client.list(kBucket, key("p/"));
  ASSERT_EQ(listed.size(), 15U);
  EXPECT_EQ(listed.front().key, key("p/100"));
  EXPECT_EQ(listed.back().key, key("p/114"));
  EXPECT_TRUE(std::is_sorted(listed.begin(), listed.end(),
                             [](const auto& a, const auto& b) { return a.key < b.key; }));
}

TEST_F(S3ClientAgainstServer, WrongKeysAreRefusedWithTheServersCodeAndNoSecretInTheMessage) {
  auto opts = options();
  opts.credentials.secret_access_key = "not-the-secret-of-the-identity";
  S3Client client(opts);
  const auto error = error_of([&] { client.put(kBucket, key("x.pt"), "x"); });
  EXPECT_EQ(error.http_status(), 403);
  EXPECT_EQ(error.code(), "SignatureDoesNotMatch");
  const std::string message = error.what();
  EXPECT_NE(message.find(std::string("s3://") + kBucket + "/" + key("x.pt")), std::string::npos)
      << message;
  EXPECT_NE(message.find(server_.endpoint), std::string::npos) << message;
  EXPECT_EQ(message.find("not-the-secret"), std::string::npos) << message;

  opts.credentials.access_key_id = "nobody";
  const auto unknown = error_of([&] { S3Client(opts).get(kBucket, key("x.pt")); });
  EXPECT_EQ(unknown.http_status(), 403);
  EXPECT_EQ(unknown.code(), "InvalidAccessKeyId");
}

TEST_F(S3ClientAgainstServer, AMissingBucketIsNamedWithNoSuchBucket) {
  S3Client client(options());
  const auto error = error_of([&] { client.put("no-such-bucket", "x.pt", "x"); });
  EXPECT_EQ(error.http_status(), 404);
  EXPECT_EQ(error.code(), "NoSuchBucket");
  EXPECT_NE(std::string(error.what()).find("s3://no-such-bucket/x.pt"), std::string::npos);
  EXPECT_EQ(error_of([&] { client.list("no-such-bucket", ""); }).code(), "NoSuchBucket");
}

TEST_F(S3ClientAgainstServer, ThrottlingIsRetriedUntilTheServerTakesTheRequest) {
  testing::FlakyProxy proxy(server_.port, /*failures=*/3);
  auto opts = options();
  opts.endpoint = "http://127.0.0.1:" + std::to_string(proxy.port());
  S3Client client(opts);
  client.put(kBucket, key("retried.pt"), "through");
  EXPECT_EQ(proxy.failed(), 3);
  EXPECT_EQ(S3Client(options()).get(kBucket, key("retried.pt")), "through");
}

TEST_F(S3ClientAgainstServer, AServerThatKeepsFailingEndsInAnErrorAfterTheLastAttempt) {
  testing::FlakyProxy proxy(server_.port, /*failures=*/100, "500 Internal Server Error",
                            "InternalError");
  auto opts = options();
  opts.endpoint = "http://127.0.0.1:" + std::to_string(proxy.port());
  opts.attempts = 3;
  const auto error = error_of([&] { S3Client(opts).put(kBucket, key("x.pt"), "x"); });
  EXPECT_EQ(error.http_status(), 500);
  EXPECT_EQ(error.code(), "InternalError");
  EXPECT_EQ(proxy.failed(), 3);
}

TEST_F(S3ClientAgainstServer, AnEndpointThatDoesNotAnswerOrResolveSaysSo) {
  auto opts = options();
  opts.attempts = 2;
  opts.endpoint = "http://127.0.0.1:" + std::to_string(testing::free_port());
  const auto refused = error_of([&] { S3Client(opts).get(kBucket, key("x.pt")); });
  EXPECT_EQ(refused.http_status(), 0);
  EXPECT_NE(std::string(refused.what()).find("no answer"), std::string::npos) << refused.what();
  EXPECT_NE(std::string(refused.what()).find(opts.endpoint), std::string::npos);

  opts.endpoint = "http://no-such-host.invalid:9000";
  const auto unresolved = error_of([&] { S3Client(opts).get(kBucket, key("x.pt")); });
  EXPECT_EQ(unresolved.http_status(), 0);
  EXPECT_NE(std::string(unresolved.what()).find("no-such-host.invalid"), std::string::npos);
}

TEST_F(S3ClientAgainstServer, AConditionalPutLosesToTheWriterThatCameFirst) {
  S3Client client(options());
  EXPECT_TRUE(client.put_if(kBucket, key("f"), "1", WriteCondition::absent()));
  EXPECT_FALSE(client.put_if(kBucket, key("f"), "2", WriteCondition::absent()));
  const auto object = client.get_object(kBucket, key("f"));
  ASSERT_TRUE(object);
  EXPECT_FALSE(object->etag.empty());
  EXPECT_TRUE(client.put_if(kBucket, key("f"), "3", WriteCondition::matching(object->etag)));
  EXPECT_FALSE(client.put_if(kBucket, key("f"), "4", WriteCondition::matching(object->etag)));
}

// The same store over TLS (the fixture's certificate, from a CA of its own): with that CA as the
// bundle (AWS_CA_BUNDLE's way) every request goes through, the bodies signed UNSIGNED-PAYLOAD as
// over any https, a multipart upload included; with the system's CAs the certificate is refused
// before any request is sent, and the error says so.
TEST_F(S3ClientAgainstServer, OverHttpsItTrustsTheCaItIsGivenAndRefusesAnUnknownCertificate) {
  ASSERT_FALSE(server_.https_endpoint.empty()) << "the fixture's store serves no https";
  auto opts = options();
  opts.endpoint = server_.https_endpoint;
  opts.ca_bundle = server_.ca_bundle;
  opts.multipart_threshold = size_t{5} << 20;
  opts.part_size = size_t{5} << 20;
  S3Client client(opts);
  client.put(kBucket, key("small.pt"), "over tls");
  EXPECT_EQ(client.get(kBucket, key("small.pt")), "over tls");
  std::string large((size_t{11} << 20) + 7, '\0');
  for (size_t i = 0; i < large.size(); ++i) large[i] = static_cast<char>((i * 131) % 251);
  client.put(kBucket, key("large.pt"), large);
  EXPECT_EQ(client.get(kBucket, key("large.pt")), large);
  EXPECT_TRUE(client.put_if(kBucket, key("fence"), "1", WriteCondition::absent()));
  const auto listed = client.list(kBucket, prefix_ + "/");
  ASSERT_EQ(listed.size(), 3U);
  EXPECT_EQ(listed[1].key, key("large.pt"));
  EXPECT_EQ(listed[1].size, static_cast<int64_t>(large.size()));

  opts.ca_bundle.clear();  // the system's CAs, which never signed it
  opts.attempts = 1;
  const auto refused = error_of([&] { S3Client(opts).get(kBucket, key("small.pt")); });
  EXPECT_EQ(refused.http_status(), 0);
  EXPECT_NE(std::string(refused.what()).find("certificate"), std::string::npos) << refused.what();
  EXPECT_NE(std::string(refused.what()).find(server_.https_endpoint), std::string::npos);
}

// Virtual-host addressing, AWS's own: the bucket is part of the host name
// (cifar-tests.s3.localhost: the server is told s3.localhost is its domain, and curl resolves
// *.localhost to the loopback), over https with a certificate for *.s3.localhost.
TEST_F(S3ClientAgainstServer, VirtualHostAddressingPutsTheBucketInTheHostName) {
  ASSERT_FALSE(server_.https_endpoint.empty()) << "the fixture's store serves no https";
  auto opts = options();
  const auto port = server_.https_endpoint.substr(server_.https_endpoint.rfind(':'));
  opts.endpoint = "https://s3.localhost" + port;
  opts.ca_bundle = server_.ca_bundle;
  opts.path_style = false;
  S3Client client(opts);
  client.put(kBucket, key("hosted.pt"), "by host name");
  EXPECT_EQ(client.get(kBucket, key("hosted.pt")), "by host name");
  const auto listed = client.list(kBucket, prefix_ + "/");
  ASSERT_EQ(listed.size(), 1U);
  EXPECT_EQ(listed[0].key, key("hosted.pt"));
  client.remove(kBucket, key("hosted.pt"));
  EXPECT_FALSE(client.get_if_exists(kBucket, key("hosted.pt")));
  // The same object by path: the one store either way.
  client.put(kBucket, key("both.pt"), "one store");
  opts.endpoint = server_.endpoint;
  opts.path_style = true;
  EXPECT_EQ(S3Client(opts).get(kBucket, key("both.pt")), "one store");
}

}  // namespace cifar::storage::s3_client_test
