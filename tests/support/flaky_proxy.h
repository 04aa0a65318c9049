// A TCP relay on 127.0.0.1 in front of a real server that answers the first N requests itself
// with an HTTP error (S3's 503 SlowDown by default) and relays every other connection to the
// server unchanged: how a test sees a client retry a throttling or failing server. One connection
// at a time (the clients under test send one request at a time).
#pragma once

#include <atomic>
#include <string>
#include <thread>

namespace cifar::testing {

class FlakyProxy {
 public:
  FlakyProxy(int target_port, int failures, std::string status_line = "503 Slow Down",
             std::string s3_code = "SlowDown");
  ~FlakyProxy();
  FlakyProxy(const FlakyProxy&) = delete;
  FlakyProxy& operator=(const FlakyProxy&) = delete;

  [[nodiscard]] int port() const { return port_; }
  [[nodiscard]] int failed() const { return failed_; }    // requests answered with the error
  [[nodiscard]] int relayed() const { return relayed_; }  // connections relayed

 private:
  void serve();
  void fail(int connection);
  void relay(int connection) const;

  int target_port_;
  int failures_;
  std::string status_line_;
  std::string s3_code_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> failed_{0};
  std::atomic<int> relayed_{0};
  std::thread thread_;
};

}  // namespace cifar::testing
