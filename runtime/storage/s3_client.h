// An S3 client for checkpoints: put (one PUT, or a multipart upload above a size), get, list and
// delete objects, over libcurl with its AWS Signature V4. Transient failures (the connection, DNS,
// a stalled server, 5xx, throttling) are retried a few times with backoff (seconds, not minutes:
// riding out a longer outage is storage/retrying_store.h's); what is left is an S3Error that names
// the bucket, the endpoint and the server's error code, and says whether it was transient.
// Credentials never appear in an error.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "http/curl_easy.h"

namespace cifar::storage {

struct S3Credentials {
  std::string access_key_id;
  std::string secret_access_key;
  // AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, the names every S3 tool reads; nullopt if unset.
  static std::optional<S3Credentials> from_environment();
};

struct S3ClientOptions {
  // scheme://host[:port]; "" for AWS's regional endpoint, https://s3.REGION.amazonaws.com.
  std::string endpoint;
  std::string region = "us-east-1";
  // Path-style (endpoint/bucket/key: every S3-compatible server) or virtual-host style
  // (bucket.host/key: AWS's own).
  bool path_style = true;
  S3Credentials credentials;
  // A PEM file of the certificate authorities to trust over https (AWS_CA_BUNDLE, as the AWS CLI
  // reads it): a store with a private CA; "" trusts the system's.
  std::string ca_bundle;
  std::chrono::seconds connect_timeout{10};
  std::chrono::seconds request_timeout{300};  // of one request: a large part on a slow link
  // A request that moves no byte for this long is given up (a stopped or wedged server accepts
  // connections in its kernel and never answers): transient, retried.
  std::chrono::seconds stall_timeout{20};
  int attempts = 5;  // of a request that fails transiently
  std::chrono::milliseconds first_backoff{200};
  size_t multipart_threshold = size_t{64} << 20;  // objects at least this big go in parts
  size_t part_size = size_t{16} << 20;            // S3's minimum is 5 MiB (but for the last)
  int list_page_size = 1000;                      // keys a listing asks for at once (S3's most)
};

// Whether a store's failure may go away by itself (worth waiting for) or not (worth saying at
// once).
enum class Failure {
  kPermanent,  // refused: wrong keys (403), no such bucket, a bad request or signature, TLS trust
  kTransient,  // away: no connection, DNS, a timeout or stall, 5xx, throttling (429, SlowDown)
};

// What a request met: a curl error (no answer), or the server's HTTP status and S3 code.
Failure classify(int curl_code, long http_status, std::string_view s3_code);

class S3Error : public std::runtime_error {
 public:
  S3Error(const std::string& message, long http_status, std::string code,
          Failure failure = Failure::kPermanent)
      : std::runtime_error(message),
        http_status_(http_status),
        code_(std::move(code)),
        failure_(failure) {}
  // 0 when no answer came (the endpoint did not resolve, connect, or answer in time).
  [[nodiscard]] long http_status() const { return http_status_; }
  // The server's code (AccessDenied, NoSuchBucket, NoSuchKey, ...), or curl's error for no answer.
  [[nodiscard]] const std::string& code() const { return code_; }
  [[nodiscard]] bool transient() const { return failure_ == Failure::kTransient; }
  // The same failure, told as `message` (which says more about what it cost).
  [[nodiscard]] S3Error retold(const std::string& message) const {
    return S3Error(message, http_status_, code_, failure_);
  }

 private:
  long http_status_;
  std::string code_;
  Failure failure_;
};

struct ObjectInfo {
  std::string key;
  int64_t size = 0;
  std::string etag;  // without its quotes: a single PUT's is the MD5 of the bytes (hex)
};

// An object's bytes and its ETag, the version a conditional write names.
struct StoredObject {
  std::string body;
  std::string etag;
};

// What a conditional PUT requires of the object it replaces (S3's If-None-Match: * and If-Match).
struct WriteCondition {
  std::optional<std::string> etag;  // nullopt: the object must not exist yet

  static WriteCondition absent() { return {}; }
  static WriteCondition matching(std::string etag) { return {std::move(etag)}; }
};

class S3Client {
 public:
  explicit S3Client(S3ClientOptions options);
  ~S3Client();
  S3Client(const S3Client&) = delete;
  S3Client& operator=(const S3Client&) = delete;

  // The object whole under `key`, or nothing: a multipart upload becomes visible only once
  // completed, a single PUT only once all of it arrived (its Content-MD5 checked by the server).
  void put(const std::string& bucket, const std::string& key, std::string_view body);
  // Throws S3Error (404, NoSuchKey) if there is none.
  std::string get(const std::string& bucket, const std::string& key);
  std::optional<std::string> get_if_exists(const std::string& bucket, const std::string& key);
  std::optional<StoredObject> get_object(const std::string& bucket, const std::string& key);
  // `length` bytes of the object from byte `offset` (a ranged GET: 206 Partial Content); throws
  // S3Error if the object has no such range (416), is not there (404), or (with `etag`) is no
  // longer that version (412: If-Match).
  std::string get_range(const std::string& bucket, const std::string& key, int64_t offset,
                        int64_t length, const std::string& etag = "");
  // A single PUT that lands only if `condition` holds; false when another writer came first (412
  // Precondition Failed, or 409 while a concurrent conditional write is in progress).
  bool put_if(const std::string& bucket, const std::string& key, std::string_view body,
              const WriteCondition& condition);
  // Every object whose key starts with `prefix`, in key order (all pages of ListObjectsV2).
  std::vector<ObjectInfo> list(const std::string& bucket, const std::string& prefix);
  // Deleting what is not there succeeds, as in S3.
  void remove(const std::string& bucket, const std::string& key);

  [[nodiscard]] const std::string& endpoint() const { return endpoint_; }

 private:
  struct Request;
  struct Response;
  class Lease;
  Response perform(const Request& request);
  Response perform_once(const Request& request);
  void put_in_parts(const std::string& bucket, const std::string& key, std::string_view body);
  [[nodiscard]] std::string url(const std::string& bucket, const std::string& key,
                                const std::string& query) const;
  // "s3://bucket/key at endpoint" (no key: the bucket), as every error names its object.
  [[nodiscard]] std::string where_is(const std::string& bucket, const std::string& key) const;
  [[nodiscard]] S3Error error_of(const Request& request, const Response& response) const;

  S3ClientOptions options_;
  std::string endpoint_;
  bool https_ = false;
  // Handles between requests: each keeps its connection open, so that a checkpoint's requests
  // (fence reads, the PUT, the rotation) do not each pay a TCP (and TLS) handshake.
  std::mutex idle_mu_;
  std::vector<http::CurlEasy> idle_;
};

// A query string as SigV4 wants it (and curl 7.88 signs it verbatim): keys in byte order, each
// value percent-encoded with only A-Z a-z 0-9 - . _ ~ left bare, and `key=` for a key without one.
std::string canonical_query(std::vector<std::pair<std::string, std::string>> parameters);
std::string percent_encode(std::string_view text);

}  // namespace cifar::storage
