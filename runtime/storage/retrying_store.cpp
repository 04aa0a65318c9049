#include "storage/retrying_store.h"

#include <spdlog/spdlog.h>

#include "storage/backoff.h"
#include "storage/cancellation.h"
#include "storage/s3_client.h"

namespace cifar::storage {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

RetryingStore::RetryingStore(std::unique_ptr<Store> inner, std::chrono::seconds patience,
                             std::chrono::milliseconds first_backoff)
    : inner_(std::move(inner)), patience_(patience), first_backoff_(first_backoff) {}

template <typename Request>
auto RetryingStore::patiently(const char* what, std::string_view name, Request request) const {
  std::optional<Clock::time_point> first_failure;
  Backoff backoff(first_backoff_, std::chrono::seconds(10));
  while (true) {
    if (requests_cancelled()) throw_cancelled(std::string(what) + " " + location_of(name));
    try {
      auto result = request();
      if (first_failure) record_success();
      return result;
    } catch (const S3Error& e) {
      if (!e.transient()) throw;
      const auto now = Clock::now();
      if (!first_failure) {
        first_failure = now;
        spdlog::warn("store {} did not answer {} {} ({}); trying again for up to {} s", location(),
                     what, name, e.what(), patience_.count());
      }
      record_failure(e.what());
      const auto waited = now - *first_failure;
      if (waited >= patience_) {
        throw S3Error(
            location() + " did not answer " + what + " " + std::string(name) + " for " +
                std::to_string(std::chrono::duration_cast<std::chrono::seconds>(waited).count()) +
                " s, longer than the job allows (checkpoint.maxUnsavedSeconds, "
                "--max-unsaved-seconds " +
                std::to_string(patience_.count()) + "); last error: " + e.what(),
            e.http_status(), e.code(), Failure::kTransient);
      }
      const auto left = patience_ - waited;
      wait_before_retry(
          std::chrono::duration_cast<std::chrono::milliseconds>(
              std::min<Clock::duration>(backoff.next(), left + std::chrono::milliseconds(1))),
          std::string(what) + " " + location_of(name));
    }
  }
}

void RetryingStore::record_failure(const std::string& error) const {
  const std::lock_guard guard(mu_);
  if (!health_.unreachable_since) health_.unreachable_since = std::chrono::system_clock::now();
  health_.last_error = error;
  health_.transient_failures += 1;
}

void RetryingStore::record_success() const {
  std::chrono::system_clock::time_point since;
  {
    const std::lock_guard guard(mu_);
    if (!health_.unreachable_since) return;
    since = *health_.unreachable_since;
    health_.unreachable_since.reset();
  }
  spdlog::info("store {} answers again after {:.1f} s", location(),
               std::chrono::duration<double>(std::chrono::system_clock::now() - since).count());
}

StoreHealth RetryingStore::health() const {
  const std::lock_guard guard(mu_);
  return health_;
}

void RetryingStore::put(std::string_view name, std::string_view bytes) {
  patiently("PUT", name, [&] {
    inner_->put(name, bytes);
    return true;
  });
}

std::optional<std::string> RetryingStore::get(std::string_view name) const {
  return patiently("GET", name, [&] { return inner_->get(name); });
}

std::vector<std::string> RetryingStore::list(std::string_view prefix) const {
  return patiently("LIST", prefix, [&] { return inner_->list(prefix); });
}

void RetryingStore::remove(std::string_view name) {
  patiently("DELETE", name, [&] {
    inner_->remove(name);
    return true;
  });
}

std::optional<Versioned> RetryingStore::get_versioned(std::string_view name) const {
  return patiently("GET", name, [&] { return inner_->get_versioned(name); });
}

bool RetryingStore::put_if(std::string_view name, std::string_view bytes,
                           const std::optional<std::string>& expected) {
  // A conditional PUT that landed but whose answer was lost loses to itself when tried again
  // (412): its callers read the object again and see their own write (fence.cpp).
  return patiently("PUT", name, [&] { return inner_->put_if(name, bytes, expected); });
}

}  // namespace cifar::storage
