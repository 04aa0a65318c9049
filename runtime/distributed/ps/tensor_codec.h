// Flat float32 tensors <-> the wire's raw-bytes Tensor message, optionally as fp16/bf16.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <string>

#include "config/ps_options.h"
#include "proto/ps.pb.h"

namespace cifar::ps {

// "fp32", "fp16", "bf16" -> the wire dtype; throws std::invalid_argument otherwise.
proto::DType wire_dtype(WireDType dtype);

torch::ScalarType wire_scalar_type(proto::DType dtype);  // unspecified: float32
// Bytes per element on the wire (unspecified: float32's 4).
int64_t wire_element_bytes(proto::DType dtype);

// A contiguous copy of the float32 tensor `values` in `dtype`.
torch::Tensor to_wire(const torch::Tensor& values, proto::DType dtype);
// The same, but `values` itself when it is already contiguous float32 and float32 is wanted.
torch::Tensor to_wire_view(const torch::Tensor& values, proto::DType dtype);

// Writes the contiguous float32 tensor `values` as `dtype` into `out` (one copy into the
// message; a second for fp16/bf16, which converts first).
void encode(const torch::Tensor& values, proto::DType dtype, proto::WireTensor* out);

// Why `t` cannot be a piece of `numel` elements (empty when it can).
std::string check_piece(const proto::WireTensor& t, int64_t numel);
// The same for its dtype and shape only (a header read before its data).
std::string check_header(const proto::WireTensor& t, int64_t numel);

// A float32 view of a checked message: no copy for float32 (valid while `t` lives), a converted
// copy otherwise.
torch::Tensor decode(const proto::WireTensor& t);

}  // namespace cifar::ps
