#include "data/s3_fetch.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <exception>
#include <fstream>
#include <future>
#include <map>
#include <optional>
#include <string>
#include <system_error>
#include <thread>

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

// The store did not answer (after the client's own retries): worth waiting for.
class StoreAway : public DataError {
 public:
  using DataError::DataError;
};

// The store's failure, told as the dataset's, with its code: a refusal is for good, a store that
// did not answer is waited for (fetch_dataset), and then worth a restart, which resumes the fetch.
[[noreturn]] void throw_store_error(const std::string& what, const storage::S3Error& e) {
  const auto message =
      what + ": " + e.what() + " [" + e.code() + (e.transient() ? ", transient" : "") + "]";
  if (e.transient()) throw StoreAway(message);
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
// directory. Throws DatasetUnavailable naming what is missing or of the wrong size.
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
    // More than the official file holds is not this dataset's file (and would not fit the cache
    // the operator sizes from the official files).
    const auto records = layout.records[found.size()];
    if (object.size > records * layout.record_bytes) {
      throw DatasetUnavailable("dataset object " + object_uri(from.bucket, object.key) + " has " +
                               std::to_string(object.size / layout.record_bytes) +
                               " records, more than the " + std::to_string(records) + " of " +
                               file + " in the official archive: not this dataset's file");
    }
    found.push_back(object);
  }
  return found;
}

// Appends the object's bytes from the partial file's end, adding each range to `moved`. Up to
// `options.streams` ranged GETs are in flight at once (one connection cannot fill the link to a
// store that is far away or throttles per connection), but they are written in order, so that
// the partial file is always a prefix of the object: what a resume relies on. Each range is hashed
// into `md5` (when given) as it is written, while the next ones are in flight.
void fetch_rest(storage::S3Client& client, const std::string& bucket,
                const storage::ObjectInfo& object, const fs::path& partial,
                const FetchOptions& options, Md5* md5, std::atomic<int64_t>& moved) {
  std::ofstream out(partial, std::ios::binary | std::ios::app);
  if (!out) throw DataError("cannot write " + quoted_path(partial));
  auto offset = static_cast<int64_t>(fs::file_size(partial));
  const auto uri = object_uri(bucket, object.key);
  // The ranges from `offset` on, in order; a future's destructor waits for its GET, so that none
  // outlives this call when one fails.
  std::deque<std::future<std::string>> in_flight;
  int64_t next = offset;
  while (offset < object.size) {
    while (static_cast<int>(in_flight.size()) < std::max(1, options.streams) &&
           next < object.size) {
      const auto length = std::min(options.range_bytes, object.size - next);
      in_flight.push_back(std::async(std::launch::async, [&client, &bucket, &object, next, length] {
        return client.get_range(bucket, object.key, next, length, object.etag);
      }));
      next += length;
    }
    std::string bytes;
    try {
      const health::Wait waiting("fetch of dataset object " + uri, "");
      bytes = in_flight.front().get();
      in_flight.pop_front();
    } catch (const storage::S3Error& e) {
      if (e.http_status() == 412) {  // replaced since it was listed: its bytes would mix
        out.close();
        fs::remove(partial);
        throw DataError("dataset object " + uri +
                        " was replaced while it was fetched (its ETag is no longer " + object.etag +
                        "); a restart fetches the new version");
      }
      throw_store_error("dataset object " + uri + " (" + std::to_string(offset) + " of " +
                            std::to_string(object.size) + " bytes fetched" +
                            (e.transient() ? "; the fetch resumes there)" : ")"),
                        e);
    }
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out.flush()) throw DataError("cannot write " + quoted_path(partial));
    if (md5 != nullptr) md5->update(bytes);
    offset += static_cast<int64_t>(bytes.size());
    moved += static_cast<int64_t>(bytes.size());
  }
}

// A file in place: already there with the object's ETag, or fetched.
struct FileOutcome {
  bool reused = false;
  int64_t size = 0;
};

// One file of the dataset into `into`: kept if it is there with the object's ETag, else fetched
// (resuming a partial copy of the same version), verified and renamed into place.
FileOutcome fetch_file(storage::S3Client& client, const std::string& bucket,
                       const storage::ObjectInfo& object, const std::string& name,
                       const fs::path& into, const FetchOptions& options,
                       std::atomic<int64_t>& moved) {
  const auto file = into / name;
  const auto etag_file = into / ("." + name + ".etag");
  // Without an ETag (a store that lists none) nothing is known to be this version: fetched anew.
  const bool versioned = !object.etag.empty();
  if (versioned && fs::exists(file) && read_text(etag_file) == object.etag &&
      static_cast<int64_t>(fs::file_size(file)) == object.size) {
    return {true, object.size};
  }
  const auto partial = into / (name + ".partial");
  const auto partial_etag = into / ("." + name + ".partial.etag");
  // A partial file of another version of the object (replaced since) starts over.
  if (fs::exists(partial) && (!versioned || read_text(partial_etag) != object.etag ||
                              static_cast<int64_t>(fs::file_size(partial)) > object.size)) {
    fs::remove(partial);
  }
  // A single PUT's ETag is the MD5 of its bytes; a multipart upload's is not ("<md5>-<parts>"),
  // nor is an object's encrypted with SSE-KMS or SSE-C (not supported here).
  const auto expected_md5 = as_md5(object.etag);
  std::optional<Md5> md5;
  if (!expected_md5.empty()) md5.emplace();
  if (md5 && fs::exists(partial)) md5->update_from_file(partial);
  write_text(partial_etag, object.etag);
  fetch_rest(client, bucket, object, partial, options, md5 ? &*md5 : nullptr, moved);
  const auto size = static_cast<int64_t>(fs::file_size(partial));
  const auto md5_hex = md5 ? md5->hex() : "";
  if (size != object.size || md5_hex != expected_md5) {
    fs::remove(partial);
    throw DataError("dataset object " + object_uri(bucket, object.key) + " arrived changed: " +
                    (size != object.size
                         ? std::to_string(size) + " bytes, not " + std::to_string(object.size)
                         : "its MD5 is not its ETag " + object.etag) +
                    " (the partial copy is removed; a restart fetches it again)");
  }
  fs::rename(partial, file);
  write_text(etag_file, object.etag);
  fs::remove(partial_etag);
  return {false, size};
}

// One pass over the files not yet done (`outcomes[i]` set once file i is in place), `files` at a
// time: each one's MD5 is computed as its bytes arrive, on its own core. A failure stops the
// others taking a new file; once all stopped, a failure for good is rethrown before a store that
// was away (waiting would not mend it).
void fetch_pass(storage::S3Client& client, const storage::S3Location& from,
                const CifarLayout& layout, const fs::path& into, const FetchOptions& options,
                std::vector<std::optional<FileOutcome>>& outcomes, std::atomic<int64_t>& moved) {
  const auto objects = find_objects(client, from, layout);
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::vector<std::future<void>> fetchers;
  for (int i = 0; i < std::max(1, options.files); ++i) {
    fetchers.push_back(std::async(std::launch::async, [&] {
      for (size_t file = next++; file < objects.size() && !failed; file = next++) {
        if (outcomes[file]) continue;
        try {
          outcomes[file] = fetch_file(client, from.bucket, objects[file], layout.files[file], into,
                                      options, moved);
        } catch (...) {
          failed = true;
          throw;
        }
      }
    }));
  }
  std::exception_ptr away;
  std::exception_ptr for_good;
  for (auto& fetcher : fetchers) {
    try {
      fetcher.get();
    } catch (const StoreAway&) {
      if (!away) away = std::current_exception();
    } catch (...) {
      if (!for_good) for_good = std::current_exception();
    }
  }
  if (for_good) std::rethrow_exception(for_good);
  if (away) std::rethrow_exception(away);
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
  // A store away (a restart, a failover, throttling) is waited for up to `options.patience` from
  // the first failure after the last progress, each pass resuming where the last stopped; longer,
  // the process ends and its restart resumes.
  std::vector<std::optional<FileOutcome>> outcomes(layout.files.size());
  std::atomic<int64_t> moved{0};
  std::optional<std::chrono::steady_clock::time_point> away_since;
  auto backoff = std::chrono::seconds(1);
  for (;;) {
    const int64_t moved_before = moved;
    try {
      fetch_pass(client, from, layout, into, options, outcomes, moved);
      break;
    } catch (const StoreAway& e) {
      const auto now = std::chrono::steady_clock::now();
      if (!away_since || moved > moved_before) {  // a new outage
        away_since = now;
        backoff = std::chrono::seconds(1);
      }
      const auto away = now - *away_since;
      if (away + backoff > options.patience) {
        throw DataError(
            std::string(e.what()) + "; the store did not answer for " +
            std::to_string(std::chrono::duration_cast<std::chrono::seconds>(away).count()) +
            " s, longer than the fetch waits (" + std::to_string(options.patience.count()) + " s)");
      }
      spdlog::warn("{}; trying again in {} s (the fetch waits up to {} s for the store)", e.what(),
                   backoff.count(), options.patience.count());
      const health::Wait waiting("the object store of dataset " + from.uri() + ", away", "");
      std::this_thread::sleep_for(backoff);
      backoff = std::min(backoff * 2, std::chrono::seconds(30));
    }
  }
  // Each fetched file is what a partial copy held before this call and what it moved.
  FetchReport report;
  report.bytes = moved;
  for (const auto& outcome : outcomes) {
    if (outcome->reused) {
      ++report.reused;
    } else {
      ++report.fetched;
      report.resumed += outcome->size;
    }
  }
  report.resumed -= report.bytes;
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
