#include "storage/s3_store.h"

#include <cstdlib>
#include <stdexcept>

#include "contract/env.h"

namespace cifar::storage {
namespace {

std::string environment(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? "" : value;
}

std::string first_set(const char* name, const char* fallback) {
  auto value = environment(name);
  return value.empty() ? environment(fallback) : value;
}

}  // namespace

S3ClientOptions s3_options_from_environment() {
  S3ClientOptions options;
  // Without keys a process may still hold the store (a trainer that never writes the run): the
  // first request says what is missing.
  if (const auto credentials = S3Credentials::from_environment())
    options.credentials = *credentials;
  options.endpoint = first_set(contract::env::kAwsEndpointUrlS3, contract::env::kAwsEndpointUrl);
  if (auto region = first_set(contract::env::kAwsRegion, contract::env::kAwsDefaultRegion);
      !region.empty()) {
    options.region = region;
  }
  options.ca_bundle = environment(contract::env::kAwsCaBundle);
  const auto addressing = environment(contract::env::kS3Addressing);
  if (addressing.empty()) {
    options.path_style = !options.endpoint.empty();
  } else if (addressing == "path" || addressing == "virtual") {
    options.path_style = addressing == "path";
  } else {
    throw std::invalid_argument("CIFAR_S3_ADDRESSING is '" + addressing +
                                "'; it takes path or virtual");
  }
  return options;
}

S3Store::S3Store(S3Location location, S3ClientOptions options)
    : location_(std::move(location)), client_(std::make_unique<S3Client>(std::move(options))) {}

std::string S3Store::location() const { return location_.uri(); }

std::string S3Store::location_of(std::string_view name) const {
  return location_.uri() + "/" + std::string(name);
}

void S3Store::put(std::string_view name, std::string_view bytes) {
  client_->put(location_.bucket, location_.key(name), bytes);
}

std::optional<std::string> S3Store::get(std::string_view name) const {
  return client_->get_if_exists(location_.bucket, location_.key(name));
}

std::vector<std::string> S3Store::list(std::string_view prefix) const {
  // The prefix's own "directory": keys below it in deeper "directories" are not this store's.
  const auto directory = location_.prefix.empty() ? std::string() : location_.prefix + "/";
  std::vector<std::string> names;
  for (const auto& object : client_->list(location_.bucket, location_.key(prefix))) {
    auto name = object.key.substr(directory.size());
    if (name.find('/') == std::string::npos) names.push_back(std::move(name));
  }
  return names;
}

void S3Store::remove(std::string_view name) {
  client_->remove(location_.bucket, location_.key(name));
}

std::optional<Versioned> S3Store::get_versioned(std::string_view name) const {
  auto object = client_->get_object(location_.bucket, location_.key(name));
  if (!object) return std::nullopt;
  return Versioned{std::move(object->body), std::move(object->etag)};
}

bool S3Store::put_if(std::string_view name, std::string_view bytes,
                     const std::optional<std::string>& expected) {
  return client_->put_if(location_.bucket, location_.key(name), bytes,
                         expected ? WriteCondition::matching(*expected) : WriteCondition::absent());
}

}  // namespace cifar::storage
