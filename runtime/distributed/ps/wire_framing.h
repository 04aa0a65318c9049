// Protobuf messages whose tensor bytes travel without being copied: a message is sent as gRPC
// slices where each tensor's `data` field points at the tensor's own memory, and a received one
// is read straight from gRPC's slices into its destination memory. The bytes on the wire are
// ordinary protobuf (ps.proto), so any protobuf client or server can talk to the other end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "distributed/ps/shard_messages.h"
#include "proto/ps.pb.h"

namespace grpc {
class ByteBuffer;
}

namespace cifar::ps {

// One WireTensor of a message to send: `numel` elements of `dtype` at `data`. The bytes are
// referenced, not copied: `keep_alive` (if set) is held until gRPC has sent them; without it the
// caller keeps `data` alive until the call is over.
struct WirePiece {
  uint32_t key = 0;
  proto::DType dtype = proto::FLOAT32;
  int64_t numel = 0;
  const void* data = nullptr;
  std::shared_ptr<const void> keep_alive;
};

// `header` (a message with its repeated WireTensor field left empty) followed by `pieces` as that
// field (number `field`).
grpc::ByteBuffer frame_message(const google::protobuf::MessageLite& header, int field,
                               const std::vector<WirePiece>& pieces);

// A ParamsReply carrying `snapshot`, its tensor referenced (shard_messages.h).
grpc::ByteBuffer frame_params(const ParamsSnapshot& snapshot);

// Where a received WireTensor's data goes: `bytes` contiguous bytes at `data`.
struct Destination {
  void* data = nullptr;
  size_t bytes = 0;
};

// Reads a serialized message whose repeated WireTensor field `field` carries the tensors. For
// each one (data must be its last field, as protobuf serializers write fields in number order),
// `destination` gets the tensor's header (key, dtype, shape; no data) and says where its bytes
// go; every other field is parsed into `header`. A size mismatch or malformed bytes throw
// std::runtime_error.
void read_message(const grpc::ByteBuffer& buffer, int field, google::protobuf::MessageLite* header,
                  const std::function<Destination(const proto::WireTensor& header)>& destination);

// The destinations of a message whose tensors are the pieces 0..n-1 of a known layout, in key
// order, each landing as float32 in its own region (fp16/bf16 pieces are converted there once
// the message has been read). Errors name the piece as `<field>[k]`.
class PieceReceiver {
 public:
  // `regions[k]`: where piece k's `sizes[k]` float32 elements go.
  PieceReceiver(std::string field, std::vector<float*> regions, std::vector<int64_t> sizes);

  Destination operator()(const proto::WireTensor& header);
  // Checks that every piece came and converts those that came as fp16/bf16.
  void finish();
  [[nodiscard]] int64_t wire_bytes() const { return wire_bytes_; }

 private:
  std::string field_;
  std::vector<float*> regions_;
  std::vector<int64_t> sizes_;
  size_t next_ = 0;
  int64_t wire_bytes_ = 0;
  struct Pending {
    size_t piece;
    proto::DType dtype;
    std::vector<char> bytes;
  };
  std::vector<Pending> to_convert_;
};

// A serialized PushRequest for a shard whose pieces have `piece_sizes` elements, its gradient
// read straight from gRPC's slices into one float32 tensor. Throws std::runtime_error naming
// what is wrong (a piece's key, dtype, shape or size; malformed bytes).
Push read_push(const grpc::ByteBuffer& buffer, const std::vector<int64_t>& piece_sizes);

}  // namespace cifar::ps
