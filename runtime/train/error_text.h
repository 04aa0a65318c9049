// What an exception says, for a log line, a termination message and so a job's status: for a
// c10::Error (LibTorch's) its message without the stack trace that its what() carries.
#pragma once

#include <exception>
#include <string>

namespace cifar::train {

std::string error_text(const std::exception& error);

}  // namespace cifar::train
