#include "distributed/ps/wire_framing.h"

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>
#include <torch/torch.h>

#include <cstring>
#include <memory>
#include <stdexcept>
#include <utility>

#include "distributed/ps/tensor_codec.h"

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

// A slice over `bytes` at `data`: held by `keep_alive` until gRPC drops the slice, or borrowed.
grpc::Slice data_slice(const void* data, size_t bytes,
                       const std::shared_ptr<const void>& keep_alive) {
  if (!keep_alive) return {data, bytes, grpc::Slice::STATIC_SLICE};
  auto owner = std::make_unique<std::shared_ptr<const void>>(keep_alive);
  return {
      const_cast<void*>(data),  // NOLINT(cppcoreguidelines-pro-type-const-cast): gRPC only reads
      bytes,
      [](void* p) {
        std::unique_ptr<std::shared_ptr<const void>>(static_cast<std::shared_ptr<const void>*>(p))
            .reset();
      },
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

  void require(size_t n) const {
    if (n > size_ - position_) {
      throw std::runtime_error("malformed message: a field runs past its end");
    }
  }

 private:
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

using DestinationFn = std::function<Destination(const proto::WireTensor&)>;

// One WireTensor of `length` bytes at the reader's position.
void read_tensor(SliceReader& reader, size_t length, const DestinationFn& destination) {
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
      if (into.bytes != bytes) {
        throw std::runtime_error("piece " + std::to_string(header.key()) + ": " +
                                 std::to_string(bytes) + " data bytes, expected " +
                                 std::to_string(into.bytes));
      }
      reader.copy_to(into.data, bytes);
      has_data = true;
    } else {
      reader.skip_field(wire_type);
    }
  }
  if (reader.position() != end) throw std::runtime_error("malformed message: tensor overruns");
  if (!has_data && destination(header).bytes != 0) {
    throw std::runtime_error("piece " + std::to_string(header.key()) + " has no data");
  }
}

// Re-encodes the field whose tag was just read, so the fields besides the tensors can be parsed
// by protobuf itself.
void copy_field(SliceReader& reader, uint32_t field, uint32_t wire_type, std::string& out) {
  append_varint(out, tag(field, wire_type));
  switch (wire_type) {
    case kVarint:
      append_varint(out, reader.varint());
      return;
    case kFixed64:
    case kFixed32: {
      const size_t n = wire_type == kFixed64 ? 8 : 4;
      const size_t at = out.size();
      out.resize(at + n);
      reader.copy_to(out.data() + at, n);
      return;
    }
    case kLengthDelimited: {
      const auto n = reader.varint();
      append_varint(out, n);
      reader.require(n);
      const size_t at = out.size();
      out.resize(at + n);
      reader.copy_to(out.data() + at, n);
      return;
    }
    default:
      throw std::runtime_error("malformed message: wire type " + std::to_string(wire_type));
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
    meta.add_shape(piece.numel);
    auto meta_bytes = meta.SerializeAsString();
    const auto data_bytes = static_cast<uint64_t>(piece.numel * wire_element_bytes(piece.dtype));
    append_varint(meta_bytes, tag(kDataField, kLengthDelimited));
    append_varint(meta_bytes, data_bytes);
    std::string envelope;
    append_varint(envelope, tag(static_cast<uint32_t>(field), kLengthDelimited));
    append_varint(envelope, meta_bytes.size() + data_bytes);
    envelope += meta_bytes;
    slices.emplace_back(envelope);
    if (data_bytes > 0) slices.push_back(data_slice(piece.data, data_bytes, piece.keep_alive));
  }
  return {slices.data(), slices.size()};
}

grpc::ByteBuffer frame_params(const ParamsSnapshot& snapshot) {
  proto::ParamsReply header;
  header.set_version(snapshot.version);
  header.set_done(snapshot.done);
  header.set_stopping(snapshot.stopping);
  if (snapshot.plan.id() != 0) *header.mutable_plan() = snapshot.plan;
  header.set_redo(snapshot.redo);
  if (snapshot.samples) *header.mutable_samples() = *snapshot.samples;
  // One owner for all pieces: they are ranges of the one snapshot tensor.
  const auto values = std::make_shared<const torch::Tensor>(snapshot.values);
  const auto* data = static_cast<const char*>(values->data_ptr());
  const auto element = wire_element_bytes(snapshot.dtype);
  std::vector<WirePiece> pieces;
  pieces.reserve(snapshot.piece_sizes.size());
  int64_t offset = 0;
  for (size_t k = 0; k < snapshot.piece_sizes.size(); ++k) {
    const auto numel = snapshot.piece_sizes[k];
    pieces.push_back(
        {static_cast<uint32_t>(k), snapshot.dtype, numel, data + offset * element, values});
    offset += numel;
  }
  return frame_message(header, static_cast<int>(kParamsField), pieces);
}

void read_message(const grpc::ByteBuffer& buffer, int field, google::protobuf::MessageLite* header,
                  const DestinationFn& destination) {
  SliceReader reader(buffer);
  std::string other_fields;
  while (reader.position() < reader.size()) {
    const auto [number, wire_type] = reader.field_tag();
    if (number == static_cast<uint32_t>(field) && wire_type == kLengthDelimited) {
      read_tensor(reader, reader.varint(), destination);
    } else {
      copy_field(reader, number, wire_type, other_fields);
    }
  }
  if (!header->ParseFromString(other_fields)) {
    throw std::runtime_error("malformed message: its fields besides the tensors do not parse");
  }
}

PieceReceiver::PieceReceiver(std::string field, std::vector<float*> regions,
                             std::vector<int64_t> sizes)
    : field_(std::move(field)), regions_(std::move(regions)), sizes_(std::move(sizes)) {}

Destination PieceReceiver::operator()(const proto::WireTensor& header) {
  const size_t k = next_++;
  const auto name = field_ + "[" + std::to_string(k) + "]";
  if (k >= sizes_.size()) {
    throw std::runtime_error(name + ": more pieces than the " + std::to_string(sizes_.size()) +
                             " expected");
  }
  if (header.key() != k) {
    throw std::runtime_error(name + " has key " + std::to_string(header.key()) +
                             "; pieces must come in key order");
  }
  if (const auto why = check_header(header, sizes_[k]); !why.empty()) {
    throw std::runtime_error(name + ": " + why);
  }
  const auto bytes = static_cast<size_t>(sizes_[k] * wire_element_bytes(header.dtype()));
  wire_bytes_ += static_cast<int64_t>(bytes);
  if (header.dtype() == proto::FLOAT32) return {regions_[k], bytes};
  auto& pending = to_convert_.emplace_back(Pending{k, header.dtype(), std::vector<char>(bytes)});
  return {pending.bytes.data(), bytes};
}

void PieceReceiver::finish() {
  if (next_ != sizes_.size()) {
    throw std::runtime_error(field_ + ": " + std::to_string(next_) + " of " +
                             std::to_string(sizes_.size()) + " pieces");
  }
  for (auto& p : to_convert_) {
    const auto n = sizes_[p.piece];
    torch::from_blob(regions_[p.piece], {n}, torch::kFloat32)
        .copy_(torch::from_blob(p.bytes.data(), {n}, wire_scalar_type(p.dtype)));
  }
  to_convert_.clear();
}

Push read_push(const grpc::ByteBuffer& buffer, const std::vector<int64_t>& piece_sizes) {
  int64_t elements = 0;
  for (const auto n : piece_sizes) elements += n;
  Push push;
  push.grad = torch::empty({elements});
  std::vector<float*> regions;
  regions.reserve(piece_sizes.size());
  auto* at = push.grad.data_ptr<float>();
  for (const auto n : piece_sizes) {
    regions.push_back(at);
    at += n;
  }
  PieceReceiver receiver("grads", std::move(regions), piece_sizes);
  proto::PushRequest header;
  read_message(buffer, proto::PushRequest::kGradsFieldNumber, &header, std::ref(receiver));
  receiver.finish();
  push.trainer = header.trainer();
  push.version = header.version();
  push.learning_rate = header.learning_rate();
  push.reply_dtype = header.reply_dtype();
  push.plan = header.plan();
  push.samples = header.samples();
  push.wire_bytes = receiver.wire_bytes();
  return push;
}

}  // namespace cifar::ps
