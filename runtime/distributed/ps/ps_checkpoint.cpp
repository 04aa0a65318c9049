#include "distributed/ps/ps_checkpoint.h"

#include <spdlog/spdlog.h>
#include <torch/serialize.h>
#include <torch/torch.h>

#include <sstream>
#include <stdexcept>

#include "distributed/ps/shard_optimizer.h"
#include "distributed/ps/tensor_codec.h"
#include "train/error_text.h"

namespace cifar::ps {
namespace {

constexpr const char* kParameters = "ps/parameters";  // "name\tnumel\n" per layout parameter

std::string describe(const ShardLayout& layout) {
  std::string out;
  for (const auto& p : layout.parameters()) out += p.name + "\t" + std::to_string(p.numel) + "\n";
  return out;
}

std::vector<ParameterInfo> parse_parameters(const std::string& text) {
  std::vector<ParameterInfo> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const auto tab = line.find('\t');
    if (tab == std::string::npos) throw std::runtime_error("malformed " + std::string(kParameters));
    out.push_back({line.substr(0, tab), std::stoll(line.substr(tab + 1))});
  }
  return out;
}

int64_t read_int(torch::serialize::InputArchive& ar, const std::string& key) {
  torch::Tensor t;
  ar.read(key, t);
  return t.item<int64_t>();
}

void add_piece(const torch::Tensor& whole, const Piece& piece, proto::WireTensor* out) {
  out->set_key(piece.key);
  encode(whole.reshape({-1}).narrow(0, piece.offset, piece.length), proto::FLOAT32, out);
}

}  // namespace

JobState gather_state(const ShardLayout& layout, const std::vector<proto::StateReply>& replies,
                      const std::vector<std::vector<int64_t>>& shapes) {
  JobState state;
  state.version = replies.empty() ? 0 : replies[0].version();
  state.optimizer_steps = 0;
  for (const auto& p : layout.parameters()) state.params.push_back(torch::empty({p.numel}));
  for (int s = 0; s < layout.shards(); ++s) {
    const auto& reply = replies.at(static_cast<size_t>(s));
    const auto& pieces = layout.pieces(s);
    if (static_cast<size_t>(reply.params_size()) != pieces.size()) {
      throw std::runtime_error("PS shard " + std::to_string(s) + " returned " +
                               std::to_string(reply.params_size()) + " pieces, expected " +
                               std::to_string(pieces.size()));
    }
    state.version = std::min(state.version, reply.version());
    if (!pieces.empty()) state.optimizer_steps = reply.optimizer_steps();
    for (const auto& t : reply.params()) {
      const auto& piece = pieces.at(t.key());
      state.params[static_cast<size_t>(piece.parameter)]
          .narrow(0, piece.offset, piece.length)
          .copy_(decode(t));
    }
    for (const auto& t : reply.slots()) {
      auto& tensors = state.slots[t.slot()];
      if (tensors.empty()) {
        for (const auto& p : layout.parameters()) tensors.push_back(torch::zeros({p.numel}));
      }
      const auto& piece = pieces.at(t.key());
      tensors[static_cast<size_t>(piece.parameter)]
          .narrow(0, piece.offset, piece.length)
          .copy_(decode(t));
    }
  }
  for (size_t i = 0; i < state.params.size(); ++i) {
    state.params[i] = state.params[i].reshape(shapes.at(i));
    for (auto& [name, tensors] : state.slots) tensors[i] = tensors[i].reshape(shapes.at(i));
  }
  return state;
}

void write_job_state(torch::serialize::OutputArchive& archive, const ShardLayout& layout,
                     const JobState& state) {
  archive.write(kParameters, c10::IValue(describe(layout)));
  archive.write("ps/version", torch::tensor(state.version, torch::kInt64));
  archive.write("ps/total_updates", torch::tensor(state.total_updates, torch::kInt64));
  archive.write("ps/trainers", torch::tensor(static_cast<int64_t>(state.trainers), torch::kInt64));
  archive.write("ps/min_trainers",
                torch::tensor(static_cast<int64_t>(state.min_trainers), torch::kInt64));
  archive.write("ps/optimizer_steps", torch::tensor(state.optimizer_steps, torch::kInt64));
  for (const auto& [slot, tensors] : state.slots) {
    for (size_t i = 0; i < tensors.size(); ++i) {
      archive.write("ps/slot/" + slot + "/" + layout.parameters()[i].name, tensors[i]);
    }
  }
}

JobState read_job_state(torch::serialize::InputArchive& archive, const ShardLayout& layout) {
  c10::IValue parameters;
  if (!archive.try_read(kParameters, parameters)) {
    throw std::runtime_error("not a parameter-server checkpoint (no " + std::string(kParameters) +
                             ")");
  }
  const auto saved = parse_parameters(parameters.toStringRef());
  const auto& expected = layout.parameters();
  if (saved.size() != expected.size()) {
    throw std::runtime_error("the checkpoint's model has " + std::to_string(saved.size()) +
                             " parameters, this one " + std::to_string(expected.size()));
  }
  for (size_t i = 0; i < saved.size(); ++i) {
    if (saved[i].name != expected[i].name || saved[i].numel != expected[i].numel) {
      throw std::runtime_error("checkpoint parameter " + saved[i].name + " (" +
                               std::to_string(saved[i].numel) + ") does not match " +
                               expected[i].name + " (" + std::to_string(expected[i].numel) + ")");
    }
  }
  JobState state;
  state.version = read_int(archive, "ps/version");
  state.total_updates = read_int(archive, "ps/total_updates");
  state.trainers = static_cast<int>(read_int(archive, "ps/trainers"));
  // Written since elastic jobs (issue 57); an older checkpoint's job was fixed.
  if (torch::Tensor min_trainers; archive.try_read("ps/min_trainers", min_trainers)) {
    state.min_trainers = static_cast<int>(min_trainers.item<int64_t>());
  }
  state.optimizer_steps = read_int(archive, "ps/optimizer_steps");
  for (const auto& p : expected) {
    torch::Tensor t;
    archive.read("model/param/" + p.name, t);
    state.params.push_back(t);
  }
  for (const auto& slot : ShardOptimizer::all_slot_names()) {
    std::vector<torch::Tensor> tensors;
    for (const auto& p : expected) {
      torch::Tensor t;
      if (!archive.try_read("ps/slot/" + slot + "/" + p.name, t)) break;
      tensors.push_back(t);
    }
    if (tensors.size() == expected.size()) state.slots[slot] = std::move(tensors);
  }
  return state;
}

proto::InitRequest make_init_request(const ShardLayout& layout, int shard, const JobState& state,
                                     const train::OptimizerOptions& optimizer) {
  proto::InitRequest request;
  request.mutable_layout()->set_fingerprint(layout.fingerprint());
  request.mutable_layout()->set_pieces(static_cast<uint32_t>(layout.pieces(shard).size()));
  request.set_trainers(state.trainers);
  request.set_min_trainers(state.min_trainers);
  request.set_version(state.version);
  request.set_total_updates(state.total_updates);
  auto* o = request.mutable_optimizer();
  o->set_name(contract::name_of(train::kOptimizerNames, optimizer.kind));
  o->set_momentum(optimizer.momentum);
  o->set_nesterov(optimizer.nesterov);
  o->set_weight_decay(optimizer.weight_decay);
  o->set_beta1(optimizer.adam_beta1);
  o->set_beta2(optimizer.adam_beta2);
  request.set_optimizer_steps(state.optimizer_steps);
  for (const auto& piece : layout.pieces(shard)) {
    add_piece(state.params.at(static_cast<size_t>(piece.parameter)), piece, request.add_params());
    for (const auto& [slot, tensors] : state.slots) {
      auto* t = request.add_slots();
      t->set_slot(slot);
      add_piece(tensors.at(static_cast<size_t>(piece.parameter)), piece, t);
    }
  }
  return request;
}

std::vector<proto::InitRequest> init_requests_from_checkpoints(
    const train::CheckpointManager& checkpoints, int server, int servers, int stripes_flag,
    const train::OptimizerOptions& optimizer) {
  std::vector<proto::InitRequest> requests;
  static_cast<void>(checkpoints.restore_newest([&](const std::string& name,
                                                   const std::string& bytes) {
    torch::serialize::InputArchive archive;
    archive.load_from(bytes.data(), bytes.size());
    c10::IValue parameters;
    if (!archive.try_read(kParameters, parameters)) {
      throw std::runtime_error("not a parameter-server checkpoint");
    }
    auto infos = parse_parameters(parameters.toStringRef());
    const int stripes = stripes_per_server(infos, servers, stripes_flag);
    const ShardLayout layout(std::move(infos), servers * stripes);
    const auto state = read_job_state(archive, layout);
    spdlog::info("ps {}: restoring its {} stripe(s) from {} (version {})", server, stripes,
                 checkpoints.location_of(name), state.version);
    requests.reserve(static_cast<size_t>(stripes));
    for (int stripe = 0; stripe < stripes; ++stripe) {
      requests.push_back(make_init_request(layout, server * stripes + stripe, state, optimizer));
    }
  }));
  return requests;
}

}  // namespace cifar::ps
