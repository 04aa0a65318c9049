// Values that are one of a few names where they enter (a CRD enum, a command-line choice) and an
// enum everywhere past it: each enum's names are one table, read both ways. Here, depending on
// nothing, so that the operator (api/job.h) and the runtime can spell their tables alike.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace cifar::contract {

template <typename Enum, size_t N>
using EnumNames = std::array<std::pair<std::string_view, Enum>, N>;

template <typename Enum, size_t N>
std::string name_of(const EnumNames<Enum, N>& names, Enum value) {
  for (const auto& [name, v] : names) {
    if (v == value) return std::string(name);
  }
  return "?";
}

template <typename Enum, size_t N>
std::optional<Enum> find_named(const EnumNames<Enum, N>& names, std::string_view name) {
  for (const auto& [n, v] : names) {
    if (n == name) return v;
  }
  return std::nullopt;
}

// The names joined: "a, b, c" for error messages, "a,b,c" for the help.
template <typename Enum, size_t N>
std::string list_names(const EnumNames<Enum, N>& names, std::string_view separator = ", ") {
  std::string list;
  for (const auto& [name, v] : names) {
    if (!list.empty()) list += separator;
    list += name;
  }
  return list;
}

// The enum named `name`; throws std::invalid_argument "unknown <what> '<name>' (a, b, c)".
template <typename Enum, size_t N>
Enum parse_named(const EnumNames<Enum, N>& names, std::string_view name, const std::string& what) {
  if (auto value = find_named(names, name)) return *value;
  throw std::invalid_argument("unknown " + what + " '" + std::string(name) + "' (" +
                              list_names(names) + ")");
}

}  // namespace cifar::contract
