// What a shard takes and gives in a push-and-pull, free of the transport: wire_framing.h reads
// and writes them from and to gRPC's byte buffers, the shard (shard.h) works on them.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "proto/ps.pb.h"

namespace cifar::ps {

// The parameters a reply carries, immutable and in the wire dtype, all pieces end to end: in
// float32 outside hogwild mode the shard's own tensor (updates replace it rather than write into
// it), else a copy. Shareable between replies (a sync round's trainers all get the same one) and
// sent without a copy.
struct ParamsSnapshot {
  int64_t version = 0;
  bool done = false;
  bool stopping = false;  // the PS was asked to stop (set by the server, not the shard)
  // An elastic synchronous job's, per reply (proto::ParamsReply says what they mean).
  proto::SyncPlan plan;
  bool redo = false;
  std::optional<proto::Samples> samples;  // a synchronous update's (PS 0's first stripe)
  proto::DType dtype = proto::FLOAT32;
  torch::Tensor values;
  std::vector<int64_t> piece_sizes;
};

// Whether `plan` (an elastic synchronous job's, as a reply carries it to one trainer) places that
// trainer: there is a plan (id 0: none) and the trainer has a slot in it (-1: left out).
inline bool places_its_trainer(const proto::SyncPlan& plan) {
  return plan.id() != 0 && plan.size() > 0 && plan.slot() >= 0;
}

// The snapshot as a protobuf message (copies the bytes; for the rarely used Pull path and tests).
void to_proto(const ParamsSnapshot& snapshot, proto::ParamsReply* reply);

// A trainer's push, its gradient pieces already received end to end into one float32 tensor.
struct Push {
  int trainer = 0;
  int64_t version = 0;
  double learning_rate = 0;
  proto::DType reply_dtype = proto::DTYPE_UNSPECIFIED;
  proto::SyncPlan plan;  // an elastic synchronous job's (id 0: none)
  proto::Samples samples;
  torch::Tensor grad;
  int64_t wire_bytes = 0;  // as received, for the traffic metric
};

}  // namespace cifar::ps
