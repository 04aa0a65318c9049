#include "storage/s3_client.h"

#include <curl/curl.h>
#include <openssl/evp.h>

#include <algorithm>
#include <cstdlib>
#include <pugixml.hpp>
#include <utility>

#include "contract/env.h"
#include "health/waits.h"
#include "http/curl_easy.h"
#include "storage/backoff.h"
#include "storage/cancellation.h"
#include "storage/s3_location.h"

namespace cifar::storage {
namespace {

struct HeaderListCleanup {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};

std::string hex(const unsigned char* bytes, unsigned int size) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(static_cast<size_t>(size) * 2);
  for (unsigned int i = 0; i < size; ++i) {
    out.push_back(kDigits[bytes[i] >> 4]);
    out.push_back(kDigits[bytes[i] & 0xf]);
  }
  return out;
}

std::string digest(const EVP_MD* kind, std::string_view data, bool base64) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  if (EVP_Digest(data.data(), data.size(), md, &size, kind, nullptr) != 1) {
    throw std::runtime_error("OpenSSL digest failed");
  }
  if (!base64) return hex(md, size);
  std::string out(4 * ((size + 2) / 3) + 1, '\0');
  const int written =
      EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), md, static_cast<int>(size));
  out.resize(static_cast<size_t>(written));
  return out;
}

// The text of the first element `name` anywhere under `document`; "" if none.
std::string xml_text(const pugi::xml_document& document, const char* name) {
  const auto node = document.select_node((std::string("//") + name).c_str());
  return node ? node.node().child_value() : "";
}

size_t append_to_string(char* data, size_t size, size_t count, void* user) {
  static_cast<std::string*>(user)->append(data, size * count);
  return size * count;
}

// curl's progress callback, at least once a second: a non-zero answer aborts the transfer.
int abort_if_cancelled(void* cancellation, curl_off_t /*dltotal*/, curl_off_t /*dlnow*/,
                       curl_off_t /*ultotal*/, curl_off_t /*ulnow*/) {
  return static_cast<const Cancellation*>(cancellation)->cancelled() ? 1 : 0;
}

struct Upload {
  std::string_view body;
  size_t offset = 0;
};

size_t read_from_upload(char* buffer, size_t size, size_t count, void* user) {
  auto* upload = static_cast<Upload*>(user);
  const size_t n = std::min(size * count, upload->body.size() - upload->offset);
  std::copy_n(upload->body.data() + upload->offset, n, buffer);
  upload->offset += n;
  return n;
}

// The ETag header of an UploadPart's answer.
size_t capture_etag(char* data, size_t size, size_t count, void* user) {
  const std::string_view line(data, size * count);
  constexpr std::string_view kName = "etag:";
  if (line.size() > kName.size() &&
      std::equal(kName.begin(), kName.end(), line.begin(),
                 [](char a, char b) { return a == std::tolower(static_cast<unsigned char>(b)); })) {
    auto value = line.substr(kName.size());
    while (!value.empty() && (value.front() == ' ')) value.remove_prefix(1);
    while (!value.empty() &&
           (value.back() == '\r' || value.back() == '\n' || value.back() == ' ')) {
      value.remove_suffix(1);
    }
    *static_cast<std::string*>(user) = std::string(value);
  }
  return size * count;
}

}  // namespace

Failure classify(int curl_code, long http_status, std::string_view s3_code) {
  switch (static_cast<CURLcode>(curl_code)) {
    case CURLE_OK:
      break;
    case CURLE_COULDNT_RESOLVE_HOST:  // DNS away, or a Service just made, its name not yet served
    case CURLE_COULDNT_CONNECT:       // refused: the server restarting, a failover
    case CURLE_OPERATION_TIMEDOUT:    // no answer in time, or a stalled transfer
    case CURLE_PARTIAL_FILE:
    case CURLE_RECV_ERROR:  // reset
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_HTTP2:  // the server went away mid-request ("Error in the HTTP2 framing layer")
    case CURLE_HTTP2_STREAM:
      return Failure::kTransient;
    default:  // TLS trust, a malformed URL, ...: retrying changes nothing
      return Failure::kPermanent;
  }
  const bool transient = http_status >= 500 || http_status == 429 || s3_code == "SlowDown" ||
                         s3_code == "RequestTimeout";
  return transient ? Failure::kTransient : Failure::kPermanent;
}

std::optional<S3Credentials> S3Credentials::from_environment() {
  const char* id = std::getenv(contract::env::kAwsAccessKeyId);
  const char* secret = std::getenv(contract::env::kAwsSecretAccessKey);
  if (id == nullptr || secret == nullptr || *id == '\0' || *secret == '\0') return std::nullopt;
  return S3Credentials{id, secret};
}

std::string percent_encode(std::string_view text) {
  static constexpr char kDigits[] = "0123456789ABCDEF";
  std::string out;
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) != 0 || c == '-' || c == '.' || c == '_' || c == '~') {
      out.push_back(c);
    } else {
      out.push_back('%');
      out.push_back(kDigits[u >> 4]);
      out.push_back(kDigits[u & 0xf]);
    }
  }
  return out;
}

std::string canonical_query(std::vector<std::pair<std::string, std::string>> parameters) {
  std::sort(parameters.begin(), parameters.end());
  std::string query;
  for (const auto& [name, value] : parameters) {
    if (!query.empty()) query.push_back('&');
    query += percent_encode(name) + "=" + percent_encode(value);
  }
  return query;
}

struct S3Client::Request {
  std::string method = "GET";  // GET, PUT, POST, DELETE
  std::string bucket;
  std::string key;  // "" for the bucket itself
  std::vector<std::pair<std::string, std::string>> query;
  std::string_view body;             // of a PUT or POST
  bool with_md5 = false;             // Content-MD5: the server refuses a body that arrived changed
  std::vector<std::string> headers;  // more headers, "Name: value" (signed with the rest)
};

struct S3Client::Response {
  CURLcode curl = CURLE_OK;
  std::string curl_error;
  long status = 0;
  std::string body;
  std::string etag;
  std::string s3_code;  // of an <Error> body

  // An answer that is no failure: it came, and it is not an error status.
  [[nodiscard]] bool succeeded() const { return curl == CURLE_OK && status < 300; }
  // An answer that came with `code` (a status the caller expects: 404 for a missing object).
  [[nodiscard]] bool answered(long code) const { return curl == CURLE_OK && status == code; }
};

S3Client::S3Client(S3ClientOptions options)
    : options_(std::move(options)),
      endpoint_(options_.endpoint.empty() ? "https://s3." + options_.region + ".amazonaws.com"
                                          : options_.endpoint) {
  while (!endpoint_.empty() && endpoint_.back() == '/') endpoint_.pop_back();
  if (endpoint_.rfind("http://", 0) != 0 && endpoint_.rfind("https://", 0) != 0) {
    throw std::invalid_argument("S3 endpoint '" + endpoint_ +
                                "' is not an http:// or https:// URL");
  }
  https_ = endpoint_.rfind("https://", 0) == 0;
  if (options_.part_size < (size_t{5} << 20)) {
    throw std::invalid_argument("S3 part size below S3's minimum of 5 MiB");
  }
}

S3Client::~S3Client() = default;

std::string S3Client::url(const std::string& bucket, const std::string& key,
                          const std::string& query) const {
  if (!key.empty() && !is_plain_key(key)) {
    throw std::invalid_argument("object key '" + key +
                                "' holds characters other than letters, digits and . _ ~ - /");
  }
  std::string base;
  if (options_.path_style) {
    base = endpoint_ + "/" + bucket;
  } else {
    const auto host = endpoint_.find("://") + 3;
    base = endpoint_.substr(0, host) + bucket + "." + endpoint_.substr(host);
  }
  if (!key.empty()) base += "/" + key;
  return query.empty() ? base : base + "?" + query;
}

// A handle from the idle ones (its connection perhaps still open), back among them when done
// unless its request failed on the way (its connection is then suspect).
class S3Client::Lease {
 public:
  explicit Lease(S3Client& client) : client_(client) {
    {
      const std::lock_guard guard(client_.idle_mu_);
      if (!client_.idle_.empty()) {
        handle_ = std::move(client_.idle_.back());
        client_.idle_.pop_back();
      }
    }
    if (handle_) {
      curl_easy_reset(handle_.get());  // the options go, the connection stays
    } else {
      handle_ = http::make_curl_easy();
    }
  }
  ~Lease() {
    if (!reusable_) return;
    const std::lock_guard guard(client_.idle_mu_);
    constexpr size_t kMostIdle = 4;
    if (client_.idle_.size() < kMostIdle) client_.idle_.push_back(std::move(handle_));
  }
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;

  [[nodiscard]] CURL* get() const { return handle_.get(); }
  void keep(bool reusable) { reusable_ = reusable; }

 private:
  S3Client& client_;
  http::CurlEasy handle_;
  bool reusable_ = false;
};

S3Client::Response S3Client::perform_once(const Request& request) {
  Response response;
  Lease curl(*this);
  auto* h = curl.get();
  const auto target = url(request.bucket, request.key, canonical_query(request.query));
  const auto sigv4 = "aws:amz:" + options_.region + ":s3";
  curl_easy_setopt(h, CURLOPT_URL, target.c_str());
  curl_easy_setopt(h, CURLOPT_AWS_SIGV4, sigv4.c_str());
  curl_easy_setopt(h, CURLOPT_USERNAME, options_.credentials.access_key_id.c_str());
  curl_easy_setopt(h, CURLOPT_PASSWORD, options_.credentials.secret_access_key.c_str());
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, static_cast<long>(options_.connect_timeout.count()));
  curl_easy_setopt(h, CURLOPT_TIMEOUT, static_cast<long>(options_.request_timeout.count()));
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, static_cast<long>(options_.stall_timeout.count()));
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, append_to_string);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &response.body);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, capture_etag);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, &response.etag);
  char error[CURL_ERROR_SIZE] = {};
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, error);
  if (!options_.ca_bundle.empty()) curl_easy_setopt(h, CURLOPT_CAINFO, options_.ca_bundle.c_str());
  // Set on every request, as a pooled handle keeps its options: a handle that served a thread
  // with a cancellation must not call into it for another.
  const auto* cancellation = requests_cancellation();
  curl_easy_setopt(h, CURLOPT_NOPROGRESS, cancellation != nullptr ? 0L : 1L);
  curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION,
                   cancellation != nullptr ? abort_if_cancelled : nullptr);
  curl_easy_setopt(h, CURLOPT_XFERINFODATA, cancellation);

  // The payload's hash is signed (curl 7.88 uses this header's value for it, and sends it). Over
  // https, TLS already keeps the body intact and S3 takes UNSIGNED-PAYLOAD, as the AWS SDKs send
  // it: one pass over the body less (Content-MD5, which the server checks, stays).
  std::unique_ptr<curl_slist, HeaderListCleanup> headers;
  const auto add_header = [&](const std::string& line) {
    auto* list = curl_slist_append(headers.get(), line.c_str());
    if (list == nullptr) throw std::bad_alloc();
    static_cast<void>(headers.release());
    headers.reset(list);
  };
  add_header("x-amz-content-sha256: " + (https_ ? std::string("UNSIGNED-PAYLOAD")
                                                : digest(EVP_sha256(), request.body, false)));
  if (request.with_md5) add_header("Content-MD5: " + digest(EVP_md5(), request.body, true));
  for (const auto& line : request.headers) add_header(line);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers.get());

  Upload upload{request.body, 0};
  if (request.method == "PUT") {
    curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(h, CURLOPT_READFUNCTION, read_from_upload);
    curl_easy_setopt(h, CURLOPT_READDATA, &upload);
    curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
  } else if (request.method == "POST") {
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, request.body.data());
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
  } else if (request.method != "GET") {
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, request.method.c_str());
  }

  {
    const health::Wait in_flight(
        "S3 " + request.method + " of " + where_is(request.bucket, request.key), "");
    response.curl = curl_easy_perform(h);
  }
  if (response.curl != CURLE_OK) {
    response.curl_error = error[0] != '\0' ? error : curl_easy_strerror(response.curl);
    return response;
  }
  curl.keep(true);
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &response.status);
  // An <Error> body: of a failure, or of a CompleteMultipartUpload that answered 200 and failed.
  if (response.status >= 300 || (request.method == "POST" && !response.body.empty())) {
    pugi::xml_document document;
    if (document.load_string(response.body.c_str()) && document.child("Error")) {
      response.s3_code = xml_text(document, "Code");
      if (response.status < 300) response.status = 500;  // S3's way to fail a completion late
    }
  }
  return response;
}

S3Client::Response S3Client::perform(const Request& request) {
  if (options_.credentials.access_key_id.empty() ||
      options_.credentials.secret_access_key.empty()) {
    throw std::invalid_argument(where_is(request.bucket, "") +
                                " needs credentials: set AWS_ACCESS_KEY_ID and "
                                "AWS_SECRET_ACCESS_KEY (a Kubernetes job: "
                                "checkpoint.s3.credentialsSecret)");
  }
  const auto what = request.method + " " + where_is(request.bucket, request.key);
  Backoff backoff(options_.first_backoff, std::chrono::milliseconds(5000));
  for (int attempt = 1;; ++attempt) {
    auto response = perform_once(request);
    if (response.curl == CURLE_ABORTED_BY_CALLBACK) throw_cancelled(what);
    if (response.succeeded()) return response;
    if (attempt >= options_.attempts ||
        classify(response.curl, response.status, response.s3_code) != Failure::kTransient) {
      return response;
    }
    wait_before_retry(backoff.next(), what);
  }
}

std::string S3Client::where_is(const std::string& bucket, const std::string& key) const {
  return "s3://" + bucket + (key.empty() ? "" : "/" + key) + " at " + endpoint_;
}

S3Error S3Client::error_of(const Request& request, const Response& response) const {
  const auto where = where_is(request.bucket, request.key);
  const auto failure = classify(response.curl, response.status, response.s3_code);
  if (response.curl != CURLE_OK) {
    return {where + ": no answer to " + request.method + " (" + response.curl_error + ")", 0,
            curl_easy_strerror(response.curl), failure};
  }
  std::string message;
  pugi::xml_document document;
  if (document.load_string(response.body.c_str())) message = xml_text(document, "Message");
  const auto code =
      response.s3_code.empty() ? "HTTP " + std::to_string(response.status) : response.s3_code;
  return {where + ": " + request.method + " answered " + std::to_string(response.status) + " " +
              code + (message.empty() ? "" : ": " + message),
          response.status, code, failure};
}

void S3Client::put(const std::string& bucket, const std::string& key, std::string_view body) {
  if (body.size() >= options_.multipart_threshold) {
    put_in_parts(bucket, key, body);
    return;
  }
  Request request{"PUT", bucket, key, {}, body, true, {}};
  const auto response = perform(request);
  if (!response.succeeded()) throw error_of(request, response);
}

void S3Client::put_in_parts(const std::string& bucket, const std::string& key,
                            std::string_view body) {
  Request begin{"POST", bucket, key, {{"uploads", ""}}, {}, false, {}};
  const auto begun = perform(begin);
  if (!begun.succeeded()) throw error_of(begin, begun);
  pugi::xml_document document;
  document.load_string(begun.body.c_str());
  const auto upload_id = xml_text(document, "UploadId");
  if (upload_id.empty()) {
    throw S3Error(where_is(bucket, key) + ": CreateMultipartUpload answered no UploadId",
                  begun.status, "NoUploadId");
  }
  try {
    std::string completion = "<CompleteMultipartUpload>";
    int number = 1;
    for (size_t offset = 0; offset < body.size(); offset += options_.part_size, ++number) {
      Request part{"PUT",
                   bucket,
                   key,
                   {{"partNumber", std::to_string(number)}, {"uploadId", upload_id}},
                   body.substr(offset, options_.part_size),
                   true,
                   {}};
      const auto sent = perform(part);
      if (!sent.succeeded()) throw error_of(part, sent);
      completion += "<Part><PartNumber>" + std::to_string(number) + "</PartNumber><ETag>" +
                    sent.etag + "</ETag></Part>";
    }
    completion += "</CompleteMultipartUpload>";
    Request complete{"POST", bucket, key, {{"uploadId", upload_id}}, completion, false, {}};
    const auto completed = perform(complete);
    if (!completed.succeeded()) throw error_of(complete, completed);
  } catch (...) {
    // Parts of an upload never completed are not an object, but they take space until aborted.
    Request abort{"DELETE", bucket, key, {{"uploadId", upload_id}}, {}, false, {}};
    static_cast<void>(perform(abort));
    throw;
  }
}

std::optional<StoredObject> S3Client::get_object(const std::string& bucket,
                                                 const std::string& key) {
  Request request{"GET", bucket, key, {}, {}, false, {}};
  auto response = perform(request);
  if (response.answered(404) && response.s3_code == "NoSuchKey") {
    return std::nullopt;
  }
  if (!response.succeeded()) throw error_of(request, response);
  return StoredObject{std::move(response.body), std::move(response.etag)};
}

std::string S3Client::get_range(const std::string& bucket, const std::string& key, int64_t offset,
                                int64_t length, const std::string& etag) {
  if (offset < 0 || length <= 0) {
    throw std::invalid_argument("get_range of " + where_is(bucket, key) + ": bytes " +
                                std::to_string(offset) + "+" + std::to_string(length));
  }
  Request request{
      "GET",
      bucket,
      key,
      {},
      {},
      false,
      {"Range: bytes=" + std::to_string(offset) + "-" + std::to_string(offset + length - 1)}};
  if (!etag.empty()) request.headers.push_back("If-Match: \"" + etag + "\"");
  auto response = perform(request);
  if (!response.answered(206)) {
    if (!response.succeeded()) throw error_of(request, response);
    // A server that ignores Range answers 200 with the whole object: not what was asked.
    throw S3Error(where_is(bucket, key) + ": asked for bytes " + std::to_string(offset) + "-" +
                      std::to_string(offset + length - 1) + ", the store answered " +
                      std::to_string(response.status) + " without a range",
                  response.status, "RangeIgnored");
  }
  if (static_cast<int64_t>(response.body.size()) != length) {
    throw S3Error(where_is(bucket, key) + ": asked for " + std::to_string(length) +
                      " bytes from byte " + std::to_string(offset) + ", got " +
                      std::to_string(response.body.size()),
                  response.status, "ShortRange", Failure::kTransient);
  }
  return std::move(response.body);
}

std::optional<std::string> S3Client::get_if_exists(const std::string& bucket,
                                                   const std::string& key) {
  auto object = get_object(bucket, key);
  if (!object) return std::nullopt;
  return std::move(object->body);
}

bool S3Client::put_if(const std::string& bucket, const std::string& key, std::string_view body,
                      const WriteCondition& condition) {
  Request request{"PUT", bucket, key, {}, body, true, {}};
  request.headers.push_back(condition.etag ? "If-Match: " + *condition.etag : "If-None-Match: *");
  const auto response = perform(request);
  if (response.answered(412) || response.answered(409)) {
    return false;
  }
  if (!response.succeeded()) throw error_of(request, response);
  return true;
}

std::string S3Client::get(const std::string& bucket, const std::string& key) {
  auto body = get_if_exists(bucket, key);
  if (!body) {
    throw S3Error(where_is(bucket, key) + ": no such object", 404, "NoSuchKey");
  }
  return std::move(*body);
}

std::vector<ObjectInfo> S3Client::list(const std::string& bucket, const std::string& prefix) {
  std::vector<ObjectInfo> objects;
  std::string token;
  while (true) {
    Request request{"GET",
                    bucket,
                    "",
                    {{"list-type", "2"},
                     {"max-keys", std::to_string(options_.list_page_size)},
                     {"prefix", prefix}},
                    {},
                    false,
                    {}};
    if (!token.empty()) request.query.emplace_back("continuation-token", token);
    const auto response = perform(request);
    if (!response.succeeded()) throw error_of(request, response);
    pugi::xml_document document;
    if (!document.load_string(response.body.c_str())) {
      throw S3Error(where_is(bucket, "") + ": a listing that is not XML", response.status,
                    "MalformedListing");
    }
    const auto result = document.child("ListBucketResult");
    for (const auto& contents : result.children("Contents")) {
      std::string_view etag = contents.child_value("ETag");
      if (etag.size() >= 2 && etag.front() == '"' && etag.back() == '"') {
        etag = etag.substr(1, etag.size() - 2);
      }
      objects.push_back({contents.child_value("Key"),
                         std::strtoll(contents.child_value("Size"), nullptr, 10),
                         std::string(etag)});
    }
    if (std::string_view(result.child_value("IsTruncated")) != "true") break;
    token = result.child_value("NextContinuationToken");
    if (token.empty()) break;
  }
  std::sort(objects.begin(), objects.end(),
            [](const ObjectInfo& a, const ObjectInfo& b) { return a.key < b.key; });
  return objects;
}

void S3Client::remove(const std::string& bucket, const std::string& key) {
  Request request{"DELETE", bucket, key, {}, {}, false, {}};
  const auto response = perform(request);
  if (response.succeeded() || response.answered(404)) return;
  throw error_of(request, response);
}

}  // namespace cifar::storage
