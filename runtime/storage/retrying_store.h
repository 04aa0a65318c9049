// A Store that rides out an outage: every request that fails transiently (S3Error::transient: no
// connection, DNS, a stall, 5xx, throttling) is tried again with backoff until it succeeds or
// `patience` has passed since its first failure; a permanent failure (wrong keys, no bucket) is
// thrown at once. A store that stays away longer than `patience` ends in an S3Error that says for
// how long and what it last answered. Whether the store is away, and since when, is in health().
//
// How a job outlives a regional endpoint's minute of 503s, a restart or failover of the store, or
// DNS that fails for seconds, with no request given up and no restart: the bound is the job's
// checkpoint.maxUnsavedSeconds (--max-unsaved-seconds).
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "storage/store.h"

namespace cifar::storage {

class RetryingStore final : public Store {
 public:
  RetryingStore(std::unique_ptr<Store> inner, std::chrono::seconds patience,
                std::chrono::milliseconds first_backoff = std::chrono::milliseconds(500));

  [[nodiscard]] std::string location() const override { return inner_->location(); }
  [[nodiscard]] std::string location_of(std::string_view name) const override {
    return inner_->location_of(name);
  }
  void put(std::string_view name, std::string_view bytes) override;
  [[nodiscard]] std::optional<std::string> get(std::string_view name) const override;
  [[nodiscard]] std::vector<std::string> list(std::string_view prefix) const override;
  void remove(std::string_view name) override;
  [[nodiscard]] std::optional<Versioned> get_versioned(std::string_view name) const override;
  bool put_if(std::string_view name, std::string_view bytes,
              const std::optional<std::string>& expected) override;

  [[nodiscard]] StoreHealth health() const override;
  [[nodiscard]] std::chrono::seconds patience() const { return patience_; }

 private:
  template <typename Request>
  auto patiently(const char* what, std::string_view name, Request request) const;
  void record_failure(const std::string& error) const;
  void record_success() const;

  std::unique_ptr<Store> inner_;
  std::chrono::seconds patience_;
  std::chrono::milliseconds first_backoff_;
  mutable std::mutex mu_;
  mutable StoreHealth health_;
};

}  // namespace cifar::storage
