// s3:// URIs as users write them, and the query strings the S3 client signs (storage/).
#include "storage/s3_location.h"

#include <gtest/gtest.h>

#include <stdexcept>

#include "storage/s3_client.h"

namespace cifar::storage::s3_location_test {

TEST(S3Location, ABucketAndAPrefixAreReadAndGiveKeysAndTheUriBack) {
  const auto location = parse_s3_uri("s3://ckpt-bucket/team/runs/");
  EXPECT_EQ(location.bucket, "ckpt-bucket");
  EXPECT_EQ(location.prefix, "team/runs");
  EXPECT_EQ(location.key("a-step-1.pt"), "team/runs/a-step-1.pt");
  EXPECT_EQ(location.uri(), "s3://ckpt-bucket/team/runs");
  const auto root = parse_s3_uri("s3://ckpt-bucket");
  EXPECT_EQ(root.prefix, "");
  EXPECT_EQ(root.key("x.pt"), "x.pt");
}

TEST(S3Location, WhatIsNotAnS3UriIsRefusedSayingWhy) {
  const auto message_of = [](const char* uri) {
    try {
      parse_s3_uri(uri);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(message_of("/checkpoints/run").find("is not an s3:// URI"), std::string::npos);
  EXPECT_NE(message_of("s3://").find("names no bucket"), std::string::npos);
  EXPECT_NE(message_of("s3:///prefix").find("names no bucket"), std::string::npos);
  EXPECT_NE(message_of("s3://My_Bucket/p").find("not a bucket name"), std::string::npos);
  EXPECT_NE(message_of("s3://ab/p").find("not a bucket name"), std::string::npos);
  EXPECT_NE(message_of("s3://bucket/a b").find("only letters"), std::string::npos);
  EXPECT_NE(message_of("s3://bucket/a//b").find("only letters"), std::string::npos);
}

TEST(S3Location, PlainKeysAreTheirOwnUrlPath) {
  EXPECT_TRUE(is_plain_key("ns/job-1234/simplecnn-step-0000000012.pt"));
  EXPECT_FALSE(is_plain_key("/leading"));
  EXPECT_FALSE(is_plain_key("trailing/"));
  EXPECT_FALSE(is_plain_key("a+b"));
  EXPECT_FALSE(is_plain_key(""));
}

TEST(S3Query, KeysInByteOrderValuesEncodedAndEveryKeyWithAnEqualsSign) {
  EXPECT_EQ(canonical_query({{"uploads", ""}}), "uploads=");
  EXPECT_EQ(canonical_query({{"uploadId", "a_b"}, {"partNumber", "3"}}),
            "partNumber=3&uploadId=a_b");
  EXPECT_EQ(canonical_query({{"prefix", "ns/run 1/"}, {"list-type", "2"}}),
            "list-type=2&prefix=ns%2Frun%201%2F");
  EXPECT_EQ(percent_encode("A-z.0_~+=/"), "A-z.0_~%2B%3D%2F");
}

}  // namespace cifar::storage::s3_location_test
