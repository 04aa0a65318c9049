// Zero-copy framing: what frame_message writes is the protobuf encoding of the same message
// (so ordinary protobuf parses it), and read_params_reply reads ordinary protobuf back, across
// slice boundaries, refusing sizes and bytes that do not fit.
#include "dist/ps/wire_framing.h"

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>

#include "dist/ps/tensor_codec.h"

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
  snapshot.params = {to_wire(torch::arange(5, torch::kFloat32), dtype),
                     to_wire(torch::randn({1000}), dtype), to_wire(torch::ones({1}), dtype)};
  return snapshot;
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

TEST(WireFraming, ReadsProtobufRepliesAcrossSliceBoundaries) {
  const auto snapshot = example_snapshot(proto::FLOAT32);
  proto::ParamsReply message;
  to_proto(snapshot, &message);
  const auto bytes = message.SerializeAsString();
  for (const size_t chunk : {size_t{1}, size_t{3}, size_t{7}, size_t{4096}, bytes.size()}) {
    std::map<uint32_t, torch::Tensor> received;
    const auto header = read_params_reply(sliced(bytes, chunk), [&](const proto::WireTensor& t) {
      EXPECT_EQ(t.dtype(), proto::FLOAT32);
      received[t.key()] = torch::empty({t.shape(0)});
      return received[t.key()];
    });
    EXPECT_EQ(header.version(), 300);
    EXPECT_TRUE(header.done());
    EXPECT_EQ(header.params_size(), 0);
    ASSERT_EQ(received.size(), 3U) << "chunk " << chunk;
    for (uint32_t k = 0; k < 3; ++k) EXPECT_TRUE(received[k].equal(snapshot.params[k]));
  }
}

TEST(WireFraming, RefusesWrongSizesAndTruncatedBytes) {
  proto::ParamsReply message;
  to_proto(example_snapshot(proto::FLOAT32), &message);
  const auto bytes = message.SerializeAsString();
  const auto too_small = [](const proto::WireTensor& t) { return torch::empty({t.shape(0) - 1}); };
  EXPECT_THROW(read_params_reply(sliced(bytes, 64), too_small), std::runtime_error);
  const auto fits = [](const proto::WireTensor& t) { return torch::empty({t.shape(0)}); };
  EXPECT_THROW(read_params_reply(sliced(bytes.substr(0, bytes.size() - 3), 64), fits),
               std::runtime_error);
  EXPECT_THROW(read_params_reply(sliced("\x1a\xff\xff\xff\x0f", 64), fits), std::runtime_error);
}

}  // namespace
}  // namespace cifar::ps
