#include "distributed/ps/membership.h"

#include <charconv>

#include "proto/ps.pb.h"

namespace cifar::ps {

std::string member_metadata(const Member& member) {
  return std::to_string(member.trainer) + "@" + std::to_string(member.incarnation);
}

std::optional<Member> parse_member_metadata(std::string_view text) {
  const auto at = text.find('@');
  if (at == std::string_view::npos) return std::nullopt;
  Member member;
  const auto whole = [](std::string_view part, auto& value) {
    const auto [end, error] = std::from_chars(part.data(), part.data() + part.size(), value);
    return error == std::errc() && end == part.data() + part.size() && value >= 0;
  };
  if (!whole(text.substr(0, at), member.trainer) ||
      !whole(text.substr(at + 1), member.incarnation)) {
    return std::nullopt;
  }
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

bool is_stale_incarnation(const grpc::Status& status) {
  proto::ShardError error;
  return status.error_code() == grpc::StatusCode::FAILED_PRECONDITION &&
         !status.error_details().empty() && error.ParseFromString(status.error_details()) &&
         error.reason() == proto::ShardError::STALE_INCARNATION;
}

}  // namespace cifar::ps
