// A parameter-server job's state in the master's checkpoints. Optimizer state is stored whole per
// parameter ("ps/slot/<slot>/<parameter>"), not per shard, so that a checkpoint restores into any
// shard count; the layout's parameter list lets a restarted PS rebuild its shard on its own.
#pragma once

#include <torch/serialize/archive.h>
#include <torch/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "config/optimizer_options.h"
#include "distributed/ps/layout.h"
#include "proto/ps.pb.h"
#include "train/checkpoint.h"

namespace cifar::ps {

// Whole tensors, one per layout parameter.
struct JobState {
  int64_t version = 0;
  int64_t total_updates = 0;
  int trainers = 0;
  int min_trainers = 0;  // an elastic job's (InitRequest)
  std::vector<torch::Tensor> params;
  std::map<std::string, std::vector<torch::Tensor>> slots;  // slot name -> per parameter
  int64_t optimizer_steps = 0;
};

// Reassembles the shards' GetState replies; `shapes` are the parameters' shapes.
JobState gather_state(const ShardLayout& layout, const std::vector<proto::StateReply>& replies,
                      const std::vector<std::vector<int64_t>>& shapes);

void write_job_state(torch::serialize::OutputArchive& archive, const ShardLayout& layout,
                     const JobState& state);
// Reads what write_job_state wrote for a model whose parameters `layout` lists (parameters come
// from "model/param/"). Throws when the checkpoint is not a parameter-server job's.
JobState read_job_state(torch::serialize::InputArchive& archive, const ShardLayout& layout);

// The Initialize request that gives shard `shard` its part of `state`.
proto::InitRequest make_init_request(const ShardLayout& layout, int shard, const JobState& state,
                                     const train::OptimizerOptions& optimizer);

// For a restarted PS (`server` of `servers`, the job's --ps-stripes `stripes_flag`): the Initialize
// requests of its stripes (layout.h), in stripe order, from the newest readable one of
// `checkpoints`; none when there is no such checkpoint.
std::vector<proto::InitRequest> init_requests_from_checkpoints(
    const train::CheckpointManager& checkpoints, int server, int servers, int stripes_flag,
    const train::OptimizerOptions& optimizer);

}  // namespace cifar::ps
