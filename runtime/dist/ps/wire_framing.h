// Protobuf messages whose tensor bytes travel without being copied: a message is sent as gRPC
// slices where each tensor's `data` field points at the tensor's own memory, and a received one
// is read straight from gRPC's slices into its destination tensors. The bytes on the wire are
// ordinary protobuf (ps.proto), so any protobuf client or server can talk to the other end.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "dist/ps/shard.h"
#include "proto/ps.pb.h"

namespace grpc {
class ByteBuffer;
}

namespace cifar::ps {

// One WireTensor of a message: `data` is contiguous and already in the wire dtype.
struct WirePiece {
  uint32_t key = 0;
  proto::DType dtype = proto::FLOAT32;
  torch::Tensor data;
};

// `header` (a message with its repeated WireTensor field left empty) followed by `pieces` as that
// field (number `field`). Each piece's bytes are referenced, not copied: the buffer keeps the
// tensors alive until gRPC has sent them.
grpc::ByteBuffer frame_message(const google::protobuf::MessageLite& header, int field,
                               const std::vector<WirePiece>& pieces);

// A ParamsReply carrying `snapshot`, its tensors referenced (shard.h).
grpc::ByteBuffer frame_params(const ParamsSnapshot& snapshot);

// Reads a serialized ParamsReply. For each WireTensor (data must be its last field, as protobuf
// serializers write fields in number order), `destination` gets the tensor's header (key, dtype,
// shape; no data) and returns the contiguous tensor its bytes are copied into; a size mismatch
// or malformed bytes throw std::runtime_error. Returns the reply without its params.
proto::ParamsReply read_params_reply(
    const grpc::ByteBuffer& buffer,
    const std::function<torch::Tensor(const proto::WireTensor& header)>& destination);

}  // namespace cifar::ps
