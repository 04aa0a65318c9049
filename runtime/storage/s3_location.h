// Where a run's checkpoints live in object storage: s3://BUCKET/PREFIX, as users write it in
// spec.checkpoint.uri, -md and checkpoint.resumeFrom.
#pragma once

#include <string>
#include <string_view>

namespace cifar::storage {

struct S3Location {
  std::string bucket;
  std::string prefix;  // without a leading or trailing '/'; "" for the bucket's root

  // The key of `name` under the prefix.
  [[nodiscard]] std::string key(std::string_view name) const;
  [[nodiscard]] std::string uri() const;  // s3://bucket[/prefix]
};

bool is_s3_uri(std::string_view text);
// Throws std::invalid_argument saying what is wrong: not s3://, no bucket, a bucket name S3 does
// not allow, or a prefix with characters other than A-Z a-z 0-9 . _ ~ - / (kept out so that a key
// is its own URL path: no encoding to get wrong between the signer and the server).
S3Location parse_s3_uri(std::string_view uri);

// Whether `key` is made only of the characters above (and has no empty segment).
bool is_plain_key(std::string_view key);

}  // namespace cifar::storage
