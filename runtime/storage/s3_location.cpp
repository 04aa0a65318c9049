#include "storage/s3_location.h"

#include <algorithm>
#include <cctype>
#include <stdexcept>

namespace cifar::storage {
namespace {

constexpr std::string_view kScheme = "s3://";

bool is_key_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' || c == '_' || c == '~' ||
         c == '-' || c == '/';
}

// S3's rules for bucket names: 3-63 characters, lowercase letters, digits, '.' and '-', starting
// and ending with a letter or digit.
bool is_bucket_name(std::string_view name) {
  if (name.size() < 3 || name.size() > 63) return false;
  const auto alnum = [](char c) {
    return std::islower(static_cast<unsigned char>(c)) != 0 ||
           std::isdigit(static_cast<unsigned char>(c)) != 0;
  };
  if (!alnum(name.front()) || !alnum(name.back())) return false;
  return std::all_of(name.begin(), name.end(),
                     [&](char c) { return alnum(c) || c == '.' || c == '-'; });
}

}  // namespace

std::string S3Location::key(std::string_view name) const {
  return prefix.empty() ? std::string(name) : prefix + "/" + std::string(name);
}

std::string S3Location::uri() const {
  return std::string(kScheme) + bucket + (prefix.empty() ? "" : "/" + prefix);
}

bool is_s3_uri(std::string_view text) { return text.rfind(kScheme, 0) == 0; }

bool is_plain_key(std::string_view key) {
  if (key.empty() || key.front() == '/' || key.back() == '/') return false;
  if (key.find("//") != std::string_view::npos) return false;
  return std::all_of(key.begin(), key.end(), is_key_char);
}

S3Location parse_s3_uri(std::string_view uri) {
  const std::string quoted = "'" + std::string(uri) + "'";
  if (!is_s3_uri(uri)) {
    throw std::invalid_argument(quoted + " is not an s3:// URI (s3://BUCKET/PREFIX)");
  }
  auto rest = uri.substr(kScheme.size());
  while (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  const auto slash = rest.find('/');
  S3Location location;
  location.bucket = std::string(rest.substr(0, slash));
  if (location.bucket.empty()) throw std::invalid_argument(quoted + " names no bucket");
  if (!is_bucket_name(location.bucket)) {
    throw std::invalid_argument(quoted + ": '" + location.bucket +
                                "' is not a bucket name S3 allows (3-63 lowercase letters, "
                                "digits, '.' and '-')");
  }
  if (slash != std::string_view::npos) {
    location.prefix = std::string(rest.substr(slash + 1));
    if (!is_plain_key(location.prefix)) {
      throw std::invalid_argument(quoted +
                                  ": the prefix may hold only letters, digits and . _ ~ "
                                  "- / (no empty path segment)");
    }
  }
  return location;
}

}  // namespace cifar::storage
