#include "storage/store.h"

#include "storage/directory_store.h"
#include "storage/s3_store.h"

namespace cifar::storage {

std::unique_ptr<Store> open_store(const std::string& location) {
  if (is_s3_uri(location)) {
    return std::make_unique<S3Store>(parse_s3_uri(location), s3_options_from_environment());
  }
  return std::make_unique<DirectoryStore>(location);
}

}  // namespace cifar::storage
