#include "train/error_text.h"

#include <c10/util/Exception.h>

namespace cifar::train {

std::string error_text(const std::exception& error) {
  if (const auto* torch_error = dynamic_cast<const c10::Error*>(&error)) {
    return torch_error->what_without_backtrace();
  }
  return error.what();
}

}  // namespace cifar::train
