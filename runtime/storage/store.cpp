#include "storage/store.h"

#include "storage/directory_store.h"
#include "storage/retrying_store.h"
#include "storage/s3_store.h"

namespace cifar::storage {

std::unique_ptr<Store> open_store(const std::string& location) {
  if (is_s3_uri(location)) {
    return std::make_unique<S3Store>(parse_s3_uri(location), s3_options_from_environment());
  }
  return std::make_unique<DirectoryStore>(location);
}

std::unique_ptr<Store> open_store(const std::string& location, std::chrono::seconds patience) {
  if (!is_s3_uri(location)) return std::make_unique<DirectoryStore>(location);
  auto options = s3_options_from_environment();
  options.attempts = 1;  // each try is the RetryingStore's: one backoff, one bound
  return std::make_unique<RetryingStore>(
      std::make_unique<S3Store>(parse_s3_uri(location), std::move(options)), patience);
}

}  // namespace cifar::storage
