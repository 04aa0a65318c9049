#include "data/s3_fetch.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <string>
#include <system_error>

#include "data/dataset.h"
#include "data/download.h"
#include "health/waits.h"
#include "storage/file_lock.h"

namespace cifar::data {
namespace fs = std::filesystem;
namespace {

std::string object_uri(const std::string& bucket, const std::string& key) {
  return "s3://" + bucket + "/" + key;
}

// The store's failure, told as the dataset's, with its code: a refusal is for good, a store that
// did not answer (after the client's retries) is worth a restart, which resumes the fetch.
[[noreturn]] void throw_store_error(const std::string& what, const storage::S3Error& e) {
  const auto message =
      what + ": " + e.what() + " [" + e.code() + (e.transient() ? ", transient" : "") + "]";
  if (e.transient()) throw DataError(message);
  throw DatasetUnavailable(message);
}

std::string read_text(const fs::path& file) {
  std::ifstream in(file);
  std::string text;
  std::getline(in, text);
  return text;
}

void write_text(const fs::path& file, const std::string& text) {
  std::ofstream out(file, std::ios::trunc);
  out << text << '\n';
  if (!out.flush()) throw DataError("cannot write " + quoted_path(file));
}

// The object of each file of `layout` under the prefix: directly there, or in the archive's top
// directory. Throws DataError naming what is missing or of the wrong size.
std::vector<storage::ObjectInfo> find_objects(storage::S3Client& client,
                                              const storage::S3Location& from,
                                              const CifarLayout& layout) {
  std::vector<storage::ObjectInfo> listed;
  try {
    listed = client.list(from.bucket, from.prefix.empty() ? "" : from.prefix + "/");
  } catch (const storage::S3Error& e) {
    throw_store_error("dataset " + from.uri() + " cannot be listed", e);
  }
  std::map<std::string, storage::ObjectInfo> by_key;
  for (auto& object : listed) by_key.emplace(object.key, std::move(object));
  std::vector<storage::ObjectInfo> found;
  for (const auto& file : layout.files) {
    auto at = by_key.find(from.key(file));
    if (at == by_key.end()) at = by_key.find(from.key(layout.top_dir + "/" + file));
    if (at == by_key.end()) {
      throw DatasetUnavailable("dataset " + from.uri() + ": no object " + file + " (nor " +
                               layout.top_dir + "/" + file + ") under the prefix; " +
                               std::to_string(listed.size()) +
                               " objects there. The prefix holds the binary files as the official "
                               "archive unpacks them");
    }
    const auto& object = at->second;
    if (object.size <= 0 || object.size % layout.record_bytes != 0) {
      throw DatasetUnavailable("dataset object " + object_uri(from.bucket, object.key) + " has " +
                               std::to_string(object.size) + " bytes, not a whole number of " +
                               std::to_string(layout.record_bytes) +
                               "-byte records: truncated, or not this dataset's file");
    }
    found.push_back(object);
  }
  return found;
}

// Appends the object's bytes from the partial file's end; returns the bytes moved.
int64_t fetch_rest(storage::S3Client& client, const std::string& bucket,
                   const storage::ObjectInfo& object, const fs::path& partial,
                   const FetchOptions& options) {
  std::ofstream out(partial, std::ios::binary | std::ios::app);
  if (!out) throw DataError("cannot write " + quoted_path(partial));
  auto offset = static_cast<int64_t>(fs::file_size(partial));
  int64_t moved = 0;
  while (offset < object.size) {
    const auto length = std::min(options.range_bytes, object.size - offset);
    std::string bytes;
    try {
      const health::Wait in_flight("fetch of dataset object " + object_uri(bucket, object.key), "");
      bytes = client.get_range(bucket, object.key, offset, length, object.etag);
    } catch (const storage::S3Error& e) {
      if (e.http_status() == 412) {  // replaced since it was listed: its bytes would mix
        out.close();
        fs::remove(partial);
        throw DataError("dataset object " + object_uri(bucket, object.key) +
                        " was replaced while it was fetched (its ETag is no longer " + object.etag +
                        "); a restart fetches the new version");
      }
      throw_store_error("dataset object " + object_uri(bucket, object.key) + " (" +
                            std::to_string(offset) + " of " + std::to_string(object.size) +
                            " bytes fetched; a restart resumes there)",
                        e);
    }
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out.flush()) throw DataError("cannot write " + quoted_path(partial));
    offset += length;
    moved += length;
  }
  return moved;
}

}  // namespace

FetchReport fetch_dataset(storage::S3Client& client, const storage::S3Location& from,
                          std::string_view dataset, const fs::path& into,
                          const FetchOptions& options) {
  const auto& layout = cifar_layout(dataset);
  const auto started = std::chrono::steady_clock::now();
  std::error_code ec;
  fs::create_directories(into, ec);
  if (ec) {
    throw DataError("cannot make the dataset cache " + quoted_path(into) + ": " + ec.message());
  }
  // The processes of a job on one machine (the ranks of `cifar-train launch`, an evaluator) share
  // a data directory: one fetches while the others wait, then find the files there.
  const auto lock = [&] {
    const health::Wait waiting("another process's fetch into " + into.string(), "");
    return storage::FileLock(into / ".fetch");
  }();
  const auto objects = find_objects(client, from, layout);
  FetchReport report;
  for (size_t i = 0; i < objects.size(); ++i) {
    const auto& object = objects[i];
    const auto file = into / layout.files[i];
    const auto etag_file = into / ("." + layout.files[i] + ".etag");
    // Without an ETag (a store that lists none) nothing is known to be this version: fetched anew.
    const bool versioned = !object.etag.empty();
    if (versioned && fs::exists(file) && read_text(etag_file) == object.etag &&
        static_cast<int64_t>(fs::file_size(file)) == object.size) {
      ++report.reused;
      continue;
    }
    const auto partial = into / (layout.files[i] + ".partial");
    const auto partial_etag = into / ("." + layout.files[i] + ".partial.etag");
    // A partial file of another version of the object (replaced since) starts over.
    if (fs::exists(partial) && (!versioned || read_text(partial_etag) != object.etag ||
                                static_cast<int64_t>(fs::file_size(partial)) > object.size)) {
      fs::remove(partial);
    }
    if (fs::exists(partial)) report.resumed += static_cast<int64_t>(fs::file_size(partial));
    write_text(partial_etag, object.etag);
    report.bytes += fetch_rest(client, from.bucket, object, partial, options);
    const auto size = static_cast<int64_t>(fs::file_size(partial));
    // A single PUT's ETag is the MD5 of its bytes; a multipart upload's is not ("<md5>-<parts>"),
    // nor is an object's encrypted with SSE-KMS or SSE-C (not supported here).
    const auto md5 = as_md5(object.etag);
    const bool changed = size != object.size || (!md5.empty() && md5_file(partial) != md5);
    if (changed) {
      fs::remove(partial);
      throw DataError(
          "dataset object " + object_uri(from.bucket, object.key) + " arrived changed: " +
          (size != object.size ? std::to_string(size) + " bytes, not " + std::to_string(object.size)
                               : "its MD5 is not its ETag " + object.etag) +
          " (the partial copy is removed; a restart fetches it again)");
    }
    fs::rename(partial, file);
    write_text(etag_file, object.etag);
    fs::remove(partial_etag);
    ++report.fetched;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  spdlog::info("dataset {}: {} file(s) fetched ({:.1f} MB{}) in {:.1f} s, {} already in {}",
               from.uri(), report.fetched, static_cast<double>(report.bytes) / 1e6,
               report.resumed > 0 ? fmt::format(", resumed after {:.1f} MB",
                                                static_cast<double>(report.resumed) / 1e6)
                                  : "",
               seconds, report.reused, into.string());
  return report;
}

}  // namespace cifar::data
