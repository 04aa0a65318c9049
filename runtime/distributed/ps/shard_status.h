// How a shard answers a call: OK, or why not. The gRPC edges map it to a status code
// (transport.h); the shard and its modes know nothing of gRPC.
#pragma once

#include <string>
#include <utility>

namespace cifar::ps {

class ShardStatus {
 public:
  enum class Code {
    kOk,
    kInvalidArgument,  // a malformed or impossible request: retrying it cannot help
    kNotInitialized,   // no parameters yet: the master has not initialised this shard
    kRetry,            // the trainer must register or pull again (dropped, or behind a restart)
    kWrongJob,         // the trainer's model layout is not the one this shard holds
    kWaiting,          // a synchronous job's trainers have not all joined yet: send it again
  };

  ShardStatus() = default;
  static ShardStatus invalid(std::string message) {
    return {Code::kInvalidArgument, std::move(message)};
  }
  static ShardStatus not_initialized() {
    return {Code::kNotInitialized,
            "shard not initialized: the master has not sent the parameters yet"};
  }
  static ShardStatus retry(std::string message) { return {Code::kRetry, std::move(message)}; }
  static ShardStatus wrong_job(std::string message) {
    return {Code::kWrongJob, std::move(message)};
  }
  static ShardStatus waiting(std::string message) { return {Code::kWaiting, std::move(message)}; }

  [[nodiscard]] bool ok() const { return code_ == Code::kOk; }
  [[nodiscard]] Code code() const { return code_; }
  [[nodiscard]] const std::string& message() const { return message_; }

 private:
  ShardStatus(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  Code code_ = Code::kOk;
  std::string message_;
};

}  // namespace cifar::ps
