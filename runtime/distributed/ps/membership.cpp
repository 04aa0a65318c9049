#include "distributed/ps/membership.h"

#include "contract/whole_number.h"
#include "proto/ps.pb.h"

namespace cifar::ps {

std::string member_metadata(const Member& member) {
  return std::to_string(member.trainer) + "@" + std::to_string(member.incarnation);
}

std::optional<Member> parse_member_metadata(std::string_view text) {
  const auto at = text.find('@');
  if (at == std::string_view::npos) return std::nullopt;
  const auto trainer = contract::whole_number<decltype(Member::trainer)>(text.substr(0, at));
  const auto incarnation =
      contract::whole_number<decltype(Member::incarnation)>(text.substr(at + 1));
  if (!trainer || !incarnation) return std::nullopt;
  Member member;
  member.trainer = *trainer;
  member.incarnation = *incarnation;
  return member;
}

grpc::Status Membership::admit(const Member& member) {
  const std::lock_guard lock(mu_);
  auto& newest = newest_[member.trainer];
  if (member.incarnation < newest) {
    proto::ShardError error;
    error.set_reason(proto::ShardError::STALE_INCARNATION);
    return {grpc::StatusCode::FAILED_PRECONDITION,
            "trainer " + std::to_string(member.trainer) + " of incarnation " +
                std::to_string(member.incarnation) + " was replaced by incarnation " +
                std::to_string(newest) + ": it may not train against this parameter server",
            error.SerializeAsString()};
  }
  newest = member.incarnation;
  return grpc::Status::OK;
}

namespace {

bool refused_for(const grpc::Status& status, proto::ShardError::Reason reason) {
  proto::ShardError error;
  return status.error_code() == grpc::StatusCode::FAILED_PRECONDITION &&
         !status.error_details().empty() && error.ParseFromString(status.error_details()) &&
         error.reason() == reason;
}

}  // namespace

bool is_stale_incarnation(const grpc::Status& status) {
  return refused_for(status, proto::ShardError::STALE_INCARNATION);
}

grpc::Status PsIncarnation::admit(std::string_view expected) {
  const auto parsed = contract::whole_number(expected);
  if (!parsed) {
    return {grpc::StatusCode::INVALID_ARGUMENT,
            "PS incarnation '" + std::string(expected) + "' is not a whole number >= 0"};
  }
  const int64_t number = *parsed;
  if (own_ == 0 || number <= own_) return grpc::Status::OK;
  int64_t seen = replaced_by_.load();
  while (seen < number && !replaced_by_.compare_exchange_weak(seen, number)) {
  }
  proto::ShardError refusal;
  refusal.set_reason(proto::ShardError::STALE_PARAMETER_SERVER);
  return {grpc::StatusCode::FAILED_PRECONDITION,
          "this parameter server, of incarnation " + std::to_string(own_) +
              ", was replaced by incarnation " + std::to_string(number) +
              ": the trainer may not train against it",
          refusal.SerializeAsString()};
}

std::optional<int64_t> PsIncarnation::replaced_by() const {
  const auto by = replaced_by_.load();
  return by > 0 ? std::optional<int64_t>(by) : std::nullopt;
}

bool is_stale_parameter_server(const grpc::Status& status) {
  return refused_for(status, proto::ShardError::STALE_PARAMETER_SERVER);
}

}  // namespace cifar::ps
