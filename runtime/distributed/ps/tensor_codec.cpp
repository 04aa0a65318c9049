#include "distributed/ps/tensor_codec.h"

#include <torch/torch.h>

#include <stdexcept>

namespace cifar::ps {
int64_t wire_element_bytes(proto::DType dtype) {
  return dtype == proto::FLOAT32 || dtype == proto::DTYPE_UNSPECIFIED ? 4 : 2;
}

torch::ScalarType wire_scalar_type(proto::DType dtype) {
  switch (dtype) {
    case proto::FLOAT16:
      return torch::kHalf;
    case proto::BFLOAT16:
      return torch::kBFloat16;
    default:
      return torch::kFloat32;
  }
}

proto::DType wire_dtype(WireDType dtype) {
  switch (dtype) {
    case WireDType::kFp32:
      return proto::FLOAT32;
    case WireDType::kFp16:
      return proto::FLOAT16;
    case WireDType::kBf16:
      return proto::BFLOAT16;
  }
  return proto::FLOAT32;
}

torch::Tensor to_wire(const torch::Tensor& values, proto::DType dtype) {
  if (dtype == proto::DTYPE_UNSPECIFIED) dtype = proto::FLOAT32;
  return values.to(wire_scalar_type(dtype), /*non_blocking=*/false, /*copy=*/true).contiguous();
}

torch::Tensor to_wire_view(const torch::Tensor& values, proto::DType dtype) {
  return values.to(wire_scalar_type(dtype)).contiguous();
}

void encode(const torch::Tensor& values, proto::DType dtype, proto::WireTensor* out) {
  if (dtype == proto::DTYPE_UNSPECIFIED) dtype = proto::FLOAT32;
  const auto wire = to_wire_view(values, dtype);
  out->set_dtype(dtype);
  out->clear_shape();
  out->add_shape(wire.numel());
  out->set_data(wire.data_ptr(), static_cast<size_t>(wire.nbytes()));
}

std::string check_piece(const proto::WireTensor& t, int64_t numel) {
  if (auto why = check_header(t, numel); !why.empty()) return why;
  const auto expected = static_cast<size_t>(numel * wire_element_bytes(t.dtype()));
  if (t.data().size() != expected) {
    return std::to_string(t.data().size()) + " data bytes, expected " + std::to_string(expected);
  }
  return {};
}

std::string check_header(const proto::WireTensor& t, int64_t numel) {
  if (t.dtype() != proto::FLOAT32 && t.dtype() != proto::FLOAT16 && t.dtype() != proto::BFLOAT16) {
    return "dtype " + proto::DType_Name(t.dtype()) + " is not FLOAT32, FLOAT16 or BFLOAT16";
  }
  if (t.shape_size() != 1 || t.shape(0) != numel) {
    std::string shape;
    for (const auto d : t.shape()) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
    return "shape [" + shape + "] but the piece has [" + std::to_string(numel) + "] elements";
  }
  return {};
}

torch::Tensor decode(const proto::WireTensor& t) {
  // from_blob never writes through the pointer here; the const_cast only satisfies its signature.
  auto* data = const_cast<char*>(t.data().data());  // NOLINT(cppcoreguidelines-pro-type-const-cast)
  const auto view = torch::from_blob(data, {t.shape(0)}, wire_scalar_type(t.dtype()));
  return t.dtype() == proto::FLOAT32 ? view : view.to(torch::kFloat32);
}

}  // namespace cifar::ps
