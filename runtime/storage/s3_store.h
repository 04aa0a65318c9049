// A Store under an s3:// prefix. Configured like every S3 tool, from the environment:
// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (required), AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL
// (default: AWS's regional endpoint), AWS_REGION or AWS_DEFAULT_REGION (default us-east-1), and
// CIFAR_S3_ADDRESSING=path|virtual (default: path-style with an endpoint, virtual-host on AWS).
// An object's version is its ETag, and put_if is S3's conditional PUT (If-Match, If-None-Match).
#pragma once

#include "storage/s3_client.h"
#include "storage/s3_location.h"
#include "storage/store.h"

namespace cifar::storage {

// The client options the environment gives; throws std::invalid_argument naming what is wrong
// (never a credential's value). Missing keys are the first request's error (S3Client).
S3ClientOptions s3_options_from_environment();

class S3Store final : public Store {
 public:
  S3Store(S3Location location, S3ClientOptions options);

  [[nodiscard]] std::string location() const override;
  [[nodiscard]] std::string location_of(std::string_view name) const override;
  void put(std::string_view name, std::string_view bytes) override;
  [[nodiscard]] std::optional<std::string> get(std::string_view name) const override;
  [[nodiscard]] std::vector<std::string> list(std::string_view prefix) const override;
  void remove(std::string_view name) override;
  [[nodiscard]] std::optional<Versioned> get_versioned(std::string_view name) const override;
  bool put_if(std::string_view name, std::string_view bytes,
              const std::optional<std::string>& expected) override;

  [[nodiscard]] const S3Client& client() const { return *client_; }

 private:
  S3Location location_;
  std::unique_ptr<S3Client> client_;  // const methods of the Store still send requests
};

}  // namespace cifar::storage
