// Zero-copy framing: what frame_message writes is the protobuf encoding of the same message
// (so ordinary protobuf parses it), and read_message reads ordinary protobuf back, across slice
// boundaries, refusing sizes and bytes that do not fit.
#include "distributed/ps/wire_framing.h"

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>

#include "distributed/ps/tensor_codec.h"

namespace cifar::ps {
namespace {

std::string bytes_of(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  std::string out;
  for (const auto& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

// `bytes` cut into slices of `chunk` bytes, as a received message may be.
grpc::ByteBuffer sliced(const std::string& bytes, size_t chunk) {
  std::vector<grpc::Slice> slices;
  for (size_t at = 0; at < bytes.size(); at += chunk) {
    slices.emplace_back(bytes.data() + at, std::min(chunk, bytes.size() - at));
  }
  return {slices.data(), slices.size()};
}

ParamsSnapshot example_snapshot(proto::DType dtype) {
  ParamsSnapshot snapshot;
  snapshot.version = 300;  // a two-byte varint
  snapshot.done = true;
  snapshot.dtype = dtype;
  snapshot.values = to_wire(
      torch::cat({torch::arange(5, torch::kFloat32), torch::randn({1000}), torch::ones({1})}),
      dtype);
  snapshot.piece_sizes = {5, 1000, 1};
  return snapshot;
}

// The pieces of `snapshot`, float32.
std::vector<torch::Tensor> pieces_of(const ParamsSnapshot& snapshot) {
  return snapshot.values.to(torch::kFloat32).split_with_sizes(snapshot.piece_sizes);
}

TEST(WireFraming, FramedMessageIsTheProtobufEncoding) {
  for (const auto dtype : {proto::FLOAT32, proto::FLOAT16}) {
    const auto snapshot = example_snapshot(dtype);
    proto::ParamsReply expected;
    to_proto(snapshot, &expected);
    proto::ParamsReply parsed;
    ASSERT_TRUE(parsed.ParseFromString(bytes_of(frame_params(snapshot))));
    EXPECT_EQ(parsed.SerializeAsString(), expected.SerializeAsString());
  }
}

// Reads a ParamsReply of `bytes` in slices of `chunk` into one float32 tensor per piece.
std::vector<torch::Tensor> receive(const std::string& bytes, size_t chunk,
                                   const std::vector<int64_t>& sizes, proto::ParamsReply* header) {
  std::vector<torch::Tensor> received;
  std::vector<float*> regions;
  for (const auto n : sizes) {
    received.push_back(torch::empty({n}));
    regions.push_back(received.back().data_ptr<float>());
  }
  PieceReceiver receiver("params", regions, sizes);
  read_message(sliced(bytes, chunk), proto::ParamsReply::kParamsFieldNumber, header,
               std::ref(receiver));
  receiver.finish();
  return received;
}

TEST(WireFraming, ReadsProtobufRepliesAcrossSliceBoundaries) {
  for (const auto dtype : {proto::FLOAT32, proto::BFLOAT16}) {
    const auto snapshot = example_snapshot(dtype);
    proto::ParamsReply message;
    to_proto(snapshot, &message);
    const auto bytes = message.SerializeAsString();
    for (const size_t chunk : {size_t{1}, size_t{3}, size_t{7}, size_t{4096}, bytes.size()}) {
      proto::ParamsReply header;
      const auto received = receive(bytes, chunk, snapshot.piece_sizes, &header);
      EXPECT_EQ(header.version(), 300);
      EXPECT_TRUE(header.done());
      EXPECT_EQ(header.params_size(), 0);
      const auto expected = pieces_of(snapshot);
      for (size_t k = 0; k < 3; ++k) {
        EXPECT_TRUE(received[k].equal(expected[k])) << "chunk " << chunk << " piece " << k;
      }
    }
  }
}

TEST(WireFraming, RefusesWrongSizesMissingOrReorderedPiecesAndTruncatedBytes) {
  proto::ParamsReply message;
  to_proto(example_snapshot(proto::FLOAT32), &message);
  const auto bytes = message.SerializeAsString();
  proto::ParamsReply header;
  auto refused = [&](const std::string& b, const std::vector<int64_t>& sizes) {
    try {
      receive(b, 64, sizes, &header);
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(refused(bytes, {5, 999, 1}).find("params[1]: shape [1000]"), std::string::npos);
  EXPECT_NE(refused(bytes, {5, 1000}).find("more pieces than the 2 expected"), std::string::npos);
  EXPECT_NE(refused(bytes, {5, 1000, 1, 4}).find("params: 3 of 4 pieces"), std::string::npos);
  EXPECT_NE(refused(bytes.substr(0, bytes.size() - 3), {5, 1000, 1}).find("runs past its end"),
            std::string::npos);
  EXPECT_FALSE(refused("\x1a\xff\xff\xff\x0f", {5, 1000, 1}).empty());
  proto::ParamsReply swapped = message;
  swapped.mutable_params()->SwapElements(0, 1);
  EXPECT_NE(refused(swapped.SerializeAsString(), {1000, 5, 1}).find("key order"),
            std::string::npos);
  EXPECT_TRUE(refused(bytes, {5, 1000, 1}).empty());
}

}  // namespace
}  // namespace cifar::ps
