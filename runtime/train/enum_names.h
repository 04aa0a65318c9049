// Options that are one of a few names on the command line and an enum everywhere past it: each
// enum's names are one table, read both ways.
#pragma once

#include <array>
#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace cifar::train {

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

// "a, b, c": for error messages.
template <typename Enum, size_t N>
std::string list_names(const EnumNames<Enum, N>& names) {
  std::string list;
  for (const auto& [name, v] : names) list += (list.empty() ? "" : ", ") + std::string(name);
  return list;
}

// The table as CLI11's CheckedTransformer takes it.
template <typename Enum, size_t N>
std::map<std::string, Enum> name_map(const EnumNames<Enum, N>& names) {
  std::map<std::string, Enum> map;
  for (const auto& [name, v] : names) map.emplace(name, v);
  return map;
}

}  // namespace cifar::train
