#include "distributed/ps/shard_messages.h"

#include <torch/torch.h>

#include "distributed/ps/tensor_codec.h"

namespace cifar::ps {

void to_proto(const ParamsSnapshot& snapshot, proto::ParamsReply* reply) {
  reply->set_version(snapshot.version);
  reply->set_done(snapshot.done);
  reply->set_stopping(snapshot.stopping);
  if (snapshot.plan.id() != 0) *reply->mutable_plan() = snapshot.plan;
  reply->set_redo(snapshot.redo);
  if (snapshot.samples) *reply->mutable_samples() = *snapshot.samples;
  const auto wire = snapshot.values.to(torch::kFloat32);
  int64_t offset = 0;
  for (size_t k = 0; k < snapshot.piece_sizes.size(); ++k) {
    auto* t = reply->add_params();
    t->set_key(static_cast<uint32_t>(k));
    encode(wire.narrow(0, offset, snapshot.piece_sizes[k]), snapshot.dtype, t);
    offset += snapshot.piece_sizes[k];
  }
}

}  // namespace cifar::ps
