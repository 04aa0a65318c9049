// Raw TCP over 127.0.0.1, the reference the communication benchmarks compare against: sockets,
// whole-buffer send/receive, and the bandwidth of plain streams.
#pragma once

#include <netinet/in.h>

#include <cstddef>
#include <cstdint>

namespace cifar::bench {

// A listening socket on 127.0.0.1 and a port picked by the kernel; closed on destruction.
class Listener {
 public:
  explicit Listener(int backlog);
  ~Listener();
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;

  [[nodiscard]] int accept() const;   // a connected socket's fd (the caller closes it)
  [[nodiscard]] int connect() const;  // a new client connection's fd (the caller closes it)

 private:
  int fd_ = -1;
  sockaddr_in addr_{};
};

void send_all(int fd, const char* data, size_t n);
void receive_all(int fd, char* data, size_t n);

// Bytes per second per direction of TCP streams over loopback, each carrying `bytes` from a
// sender thread to a receiver thread: one stream, or (both_directions) two at once in opposite
// directions between the same two endpoints, the traffic pattern of a two-rank ring all-reduce.
double tcp_stream_bandwidth(int64_t bytes, bool both_directions);
// The median of three such measurements (loopback bandwidth varies from run to run).
double median_tcp_stream_bandwidth(int64_t bytes, bool both_directions);

}  // namespace cifar::bench
