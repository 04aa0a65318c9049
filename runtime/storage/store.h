// Where a run keeps what it writes (checkpoints, fences, the done marker, logs): a directory (a
// local disk or a shared volume) or an S3-compatible bucket. Objects are named by plain names
// (letters, digits, . _ ~ -) and each is written whole: a reader sees the previous version or the
// new one, never a part (a directory: a synced temp file renamed; S3: one PUT or a completed
// multipart upload).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cifar::storage {

// Whether the store answers: since when it has not (nullopt: it answers, or nobody asked since it
// stopped), and what it last said.
struct StoreHealth {
  std::optional<std::chrono::system_clock::time_point> unreachable_since;
  std::string last_error;
  int64_t transient_failures = 0;  // requests that failed transiently and were tried again
};

// An object's bytes and an opaque version of them, for put_if.
struct Versioned {
  std::string bytes;
  std::string version;
};

class Store {
 public:
  Store() = default;
  virtual ~Store() = default;
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // The store itself (a directory's path, s3://bucket/prefix) and one of its objects: for messages.
  [[nodiscard]] virtual std::string location() const = 0;
  [[nodiscard]] virtual std::string location_of(std::string_view name) const = 0;

  // Replaces `name` with `bytes`, whole. Throws (std::system_error, S3Error) if it cannot, leaving
  // what was there.
  virtual void put(std::string_view name, std::string_view bytes) = 0;
  [[nodiscard]] virtual std::optional<std::string> get(std::string_view name) const = 0;
  // The names starting with `prefix`, in byte order.
  [[nodiscard]] virtual std::vector<std::string> list(std::string_view prefix) const = 0;
  // Removing what is not there succeeds.
  virtual void remove(std::string_view name) = 0;

  // Compare-and-swap for small records that several processes may race to write (fences): put_if
  // writes only if the object is still at `expected` (nullopt: only if there is none), and says
  // whether it did.
  [[nodiscard]] virtual std::optional<Versioned> get_versioned(std::string_view name) const = 0;
  virtual bool put_if(std::string_view name, std::string_view bytes,
                      const std::optional<std::string>& expected) = 0;

  // Whether it answers (a store that does not wait out outages says nothing: always healthy).
  [[nodiscard]] virtual StoreHealth health() const { return {}; }
};

// The store at `location`: s3://BUCKET/PREFIX (configured from the environment, see
// s3_store.h), otherwise a directory (created on the first write).
std::unique_ptr<Store> open_store(const std::string& location);
// The same, riding out an outage of up to `patience` (retrying_store.h); a directory as it is
// (a local or shared volume that fails does not come back by waiting).
std::unique_ptr<Store> open_store(const std::string& location, std::chrono::seconds patience);

}  // namespace cifar::storage
