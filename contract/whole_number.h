// How both sides read the numbers they pass each other (env values such as incarnations, the
// trainer@incarnation metadata, an annotation) and the kernel's cgroup files: a whole number >= 0
// that is all of the text, nothing else.
#pragma once

#include <charconv>
#include <cstdint>
#include <optional>
#include <string_view>

namespace cifar::contract {

template <typename Number = int64_t>
std::optional<Number> whole_number(std::string_view text) {
  Number value{};
  const auto* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (text.empty() || error != std::errc() || stop != end || value < 0) return std::nullopt;
  return value;
}

}  // namespace cifar::contract
