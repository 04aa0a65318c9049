// A libcurl easy handle owned by a unique_ptr, with libcurl's global set-up done once first: what
// the dataset download and the S3 client both start from.
#pragma once

#include <curl/curl.h>

#include <memory>
#include <mutex>
#include <stdexcept>

namespace cifar::http {

struct CurlEasyCleanup {
  void operator()(CURL* handle) const { curl_easy_cleanup(handle); }
};
using CurlEasy = std::unique_ptr<CURL, CurlEasyCleanup>;

// Throws std::runtime_error if libcurl cannot set itself up or make a handle.
inline CurlEasy make_curl_easy() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
      throw std::runtime_error("libcurl's global initialisation failed");
    }
  });
  CurlEasy handle(curl_easy_init());
  if (!handle) throw std::runtime_error("libcurl could not make a handle");
  return handle;
}

}  // namespace cifar::http
