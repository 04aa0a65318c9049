// A Store in a directory: each object a file, replaced by the rename of a synced temp file of the
// write's own (a unique name: concurrent writers of one name each publish a whole file) (and the
// directory synced), so a crash leaves the old file or the new. put_if holds an flock on
// <name>.lock for its read-compare-write; an object's version is its content.
#pragma once

#include <filesystem>

#include "storage/store.h"

namespace cifar::storage {

class DirectoryStore final : public Store {
 public:
  explicit DirectoryStore(std::filesystem::path dir);

  [[nodiscard]] std::string location() const override;
  [[nodiscard]] std::string location_of(std::string_view name) const override;
  void put(std::string_view name, std::string_view bytes) override;
  [[nodiscard]] std::optional<std::string> get(std::string_view name) const override;
  [[nodiscard]] std::vector<std::string> list(std::string_view prefix) const override;
  void remove(std::string_view name) override;
  [[nodiscard]] std::optional<Versioned> get_versioned(std::string_view name) const override;
  bool put_if(std::string_view name, std::string_view bytes,
              const std::optional<std::string>& expected) override;

 private:
  [[nodiscard]] std::filesystem::path path_of(std::string_view name) const;

  std::filesystem::path dir_;
};

}  // namespace cifar::storage
