#include "dist/ps/wire_framing.h"

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>
#include <torch/torch.h>

#include <cstring>
#include <memory>
#include <stdexcept>
#include <utility>

namespace cifar::ps {
namespace {

// Protobuf wire types (https://protobuf.dev/programming-guides/encoding/).
constexpr uint32_t kVarint = 0;
constexpr uint32_t kFixed64 = 1;
constexpr uint32_t kLengthDelimited = 2;
constexpr uint32_t kFixed32 = 5;

constexpr uint32_t kKeyField = proto::WireTensor::kKeyFieldNumber;
constexpr uint32_t kSlotField = proto::WireTensor::kSlotFieldNumber;
constexpr uint32_t kDTypeField = proto::WireTensor::kDtypeFieldNumber;
constexpr uint32_t kShapeField = proto::WireTensor::kShapeFieldNumber;
constexpr uint32_t kDataField = proto::WireTensor::kDataFieldNumber;
constexpr uint32_t kVersionField = proto::ParamsReply::kVersionFieldNumber;
constexpr uint32_t kDoneField = proto::ParamsReply::kDoneFieldNumber;
constexpr uint32_t kParamsField = proto::ParamsReply::kParamsFieldNumber;

void append_varint(std::string& out, uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

uint64_t tag(uint32_t field, uint32_t wire_type) { return (uint64_t{field} << 3) | wire_type; }

// A slice over the tensor's memory that keeps the tensor alive until gRPC drops the slice.
grpc::Slice tensor_slice(const torch::Tensor& t) {
  auto owner = std::make_unique<torch::Tensor>(t);
  void* data = owner->data_ptr();
  return {data, static_cast<size_t>(t.nbytes()),
          [](void* p) { std::unique_ptr<torch::Tensor>(static_cast<torch::Tensor*>(p)).reset(); },
          owner.release()};
}

// Sequential reads across the slices of a received message.
class SliceReader {
 public:
  explicit SliceReader(const grpc::ByteBuffer& buffer) {
    if (!buffer.Dump(&slices_).ok()) throw std::runtime_error("cannot read the gRPC message");
    for (const auto& s : slices_) size_ += s.size();
    advance(0);  // past leading empty slices
  }

  [[nodiscard]] size_t position() const { return position_; }
  [[nodiscard]] size_t size() const { return size_; }

  uint64_t varint() {
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      const auto byte = static_cast<uint8_t>(next_byte());
      value |= uint64_t{byte & 0x7fU} << shift;
      if ((byte & 0x80U) == 0) return value;
    }
    throw std::runtime_error("malformed message: varint longer than 10 bytes");
  }

  void copy_to(void* destination, size_t n) {
    require(n);
    auto* out = static_cast<uint8_t*>(destination);
    while (n > 0) {
      const auto& s = slices_[slice_];
      const size_t take = std::min(n, s.size() - offset_);
      std::memcpy(out, s.begin() + offset_, take);
      out += take;
      n -= take;
      advance(take);
    }
  }

  void skip(size_t n) {
    require(n);
    while (n > 0) {
      const size_t take = std::min(n, slices_[slice_].size() - offset_);
      n -= take;
      advance(take);
    }
  }

  // The next field's number and wire type.
  std::pair<uint32_t, uint32_t> field_tag() {
    const auto tag_value = varint();
    return {static_cast<uint32_t>(tag_value >> 3), static_cast<uint32_t>(tag_value & 7)};
  }

  void skip_field(uint32_t wire_type) {
    switch (wire_type) {
      case kVarint:
        (void)varint();
        return;
      case kFixed64:
        skip(8);
        return;
      case kLengthDelimited:
        skip(varint());
        return;
      case kFixed32:
        skip(4);
        return;
      default:
        throw std::runtime_error("malformed message: wire type " + std::to_string(wire_type));
    }
  }

 private:
  void require(size_t n) const {
    if (n > size_ - position_) {
      throw std::runtime_error("malformed message: a field runs past its end");
    }
  }
  char next_byte() {
    require(1);
    const char byte = static_cast<char>(slices_[slice_].begin()[offset_]);
    advance(1);
    return byte;
  }
  void advance(size_t n) {
    offset_ += n;
    position_ += n;
    while (slice_ < slices_.size() && offset_ == slices_[slice_].size()) {
      ++slice_;
      offset_ = 0;
    }
  }

  std::vector<grpc::Slice> slices_;
  size_t size_ = 0;
  size_t position_ = 0;
  size_t slice_ = 0;
  size_t offset_ = 0;
};

// One WireTensor of `length` bytes at the reader's position.
void read_tensor(SliceReader& reader, size_t length,
                 const std::function<torch::Tensor(const proto::WireTensor&)>& destination) {
  const size_t end = reader.position() + length;
  proto::WireTensor header;
  bool has_data = false;
  while (reader.position() < end) {
    const auto [field, wire_type] = reader.field_tag();
    if (field == kKeyField && wire_type == kVarint) {
      header.set_key(static_cast<uint32_t>(reader.varint()));
    } else if (field == kSlotField && wire_type == kLengthDelimited) {
      std::string slot(reader.varint(), '\0');
      reader.copy_to(slot.data(), slot.size());
      header.set_slot(std::move(slot));
    } else if (field == kDTypeField && wire_type == kVarint) {
      header.set_dtype(static_cast<proto::DType>(reader.varint()));
    } else if (field == kShapeField && wire_type == kLengthDelimited) {  // packed
      const auto shape_bytes = reader.varint();
      const size_t shape_end = reader.position() + shape_bytes;
      while (reader.position() < shape_end) header.add_shape(static_cast<int64_t>(reader.varint()));
    } else if (field == kShapeField && wire_type == kVarint) {
      header.add_shape(static_cast<int64_t>(reader.varint()));
    } else if (field == kDataField && wire_type == kLengthDelimited) {
      const auto bytes = reader.varint();
      const auto into = destination(header);
      if (!into.is_contiguous() || static_cast<uint64_t>(into.nbytes()) != bytes) {
        throw std::runtime_error("piece " + std::to_string(header.key()) + ": " +
                                 std::to_string(bytes) + " data bytes, expected " +
                                 std::to_string(into.nbytes()));
      }
      reader.copy_to(into.data_ptr(), bytes);
      has_data = true;
    } else {
      reader.skip_field(wire_type);
    }
  }
  if (reader.position() != end) throw std::runtime_error("malformed message: tensor overruns");
  if (!has_data && destination(header).nbytes() != 0) {
    throw std::runtime_error("piece " + std::to_string(header.key()) + " has no data");
  }
}

}  // namespace

grpc::ByteBuffer frame_message(const google::protobuf::MessageLite& header, int field,
                               const std::vector<WirePiece>& pieces) {
  std::vector<grpc::Slice> slices;
  slices.reserve(1 + 2 * pieces.size());
  if (auto head = header.SerializeAsString(); !head.empty()) slices.emplace_back(head);
  for (const auto& piece : pieces) {
    proto::WireTensor meta;
    meta.set_key(piece.key);
    meta.set_dtype(piece.dtype);
    meta.add_shape(piece.data.numel());
    auto meta_bytes = meta.SerializeAsString();
    const auto data_bytes = static_cast<uint64_t>(piece.data.nbytes());
    append_varint(meta_bytes, tag(kDataField, kLengthDelimited));
    append_varint(meta_bytes, data_bytes);
    std::string envelope;
    append_varint(envelope, tag(static_cast<uint32_t>(field), kLengthDelimited));
    append_varint(envelope, meta_bytes.size() + data_bytes);
    envelope += meta_bytes;
    slices.emplace_back(envelope);
    if (data_bytes > 0) slices.push_back(tensor_slice(piece.data.contiguous()));
  }
  return {slices.data(), slices.size()};
}

grpc::ByteBuffer frame_params(const ParamsSnapshot& snapshot) {
  proto::ParamsReply header;
  header.set_version(snapshot.version);
  header.set_done(snapshot.done);
  std::vector<WirePiece> pieces;
  pieces.reserve(snapshot.params.size());
  for (size_t k = 0; k < snapshot.params.size(); ++k) {
    pieces.push_back({static_cast<uint32_t>(k), snapshot.dtype, snapshot.params[k]});
  }
  return frame_message(header, static_cast<int>(kParamsField), pieces);
}

proto::ParamsReply read_params_reply(
    const grpc::ByteBuffer& buffer,
    const std::function<torch::Tensor(const proto::WireTensor& header)>& destination) {
  SliceReader reader(buffer);
  proto::ParamsReply reply;
  while (reader.position() < reader.size()) {
    const auto [field, wire_type] = reader.field_tag();
    if (field == kVersionField && wire_type == kVarint) {
      reply.set_version(static_cast<int64_t>(reader.varint()));
    } else if (field == kDoneField && wire_type == kVarint) {
      reply.set_done(reader.varint() != 0);
    } else if (field == kParamsField && wire_type == kLengthDelimited) {
      read_tensor(reader, reader.varint(), destination);
    } else {
      reader.skip_field(wire_type);
    }
  }
  return reply;
}

}  // namespace cifar::ps
