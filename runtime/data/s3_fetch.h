// A CIFAR dataset read from object storage (--data-uri s3://BUCKET/PREFIX): its binary files,
// under the prefix as the official archive unpacks them (directly or in the archive's top
// directory), fetched once into a local directory that is then read like any other.
//
// Each file is checked against the listing before a byte moves (there, and a whole number of
// records: a file of the wrong size for the dataset fails at once, naming the object), fetched in
// ranged GETs (several in flight, two files at once) appended in order to `<file>.partial` (an
// interrupted fetch, a restarted container, resumes where it stopped, as long as the object's ETag
// is the one it started with), verified (its size; its MD5 where the ETag is one, i.e. the object
// was a single PUT) and renamed into place with its ETag beside it (`.<file>.etag`). A file already
// there with the object's ETag is not fetched again. The store's transient failures are retried by
// the S3 client, and a store away for longer waited for (FetchOptions::patience); what is left is a
// DataError naming the object and the store's code: DatasetUnavailable where no restart would
// change it (an object missing or of the wrong size, wrong keys, no such bucket).
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string_view>

#include "storage/s3_client.h"
#include "storage/s3_location.h"

namespace cifar::data {

struct FetchOptions {
  int64_t range_bytes = int64_t{8} << 20;  // one ranged GET
  int streams = 4;  // ranged GETs in flight at once for one file (bench/dataset_fetch.sh)
  int files = 2;    // files fetched at once, each hashed on its own core as it arrives
  // How long a store that does not answer (after the client's own retries) is waited for, the
  // fetch resuming each time; then DataError (the process ends; its restart resumes).
  std::chrono::seconds patience{120};
};

struct FetchReport {
  int fetched = 0;      // files fetched (whole or resumed)
  int reused = 0;       // files already in the directory with the object's ETag
  int64_t bytes = 0;    // bytes moved
  int64_t resumed = 0;  // bytes a partial file already held
};

// Fetches `dataset`'s ("cifar10", "cifar100") files under `from` into `into` (made if missing);
// read them with read_cifar10/read_cifar100(into).
FetchReport fetch_dataset(storage::S3Client& client, const storage::S3Location& from,
                          std::string_view dataset, const std::filesystem::path& into,
                          const FetchOptions& options = {});

}  // namespace cifar::data
