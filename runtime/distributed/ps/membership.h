// Which incarnation of each trainer a parameter server serves (train/fence.h has the numbers: the
// operator gives every pod it creates a larger one than any before). A trainer names itself on
// every call ("cifar-member: <rank>@<incarnation>", transport.h); the PS remembers the newest
// incarnation it has seen of each rank and refuses calls from older ones with FAILED_PRECONDITION
// and ShardError.STALE_INCARNATION, so that a trainer left running on a cut-off node never
// trains against the job's parameters beside its replacement once the replacement has reached
// this PS. Calls that name no incarnation (a trainer run without one) are served as before.
#pragma once

#include <grpcpp/support/status.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace cifar::ps {

// A call's member: the trainer's rank and its incarnation.
struct Member {
  int trainer = 0;
  int64_t incarnation = 0;
};
std::string member_metadata(const Member& member);                   // "1@3"
std::optional<Member> parse_member_metadata(std::string_view text);  // nullopt: malformed

class Membership {
 public:
  // OK, and the member's incarnation is the newest seen of its rank from now on; or refused.
  grpc::Status admit(const Member& member);

 private:
  std::mutex mu_;
  std::map<int, int64_t> newest_;  // rank -> newest incarnation seen
};

// Whether a call was refused because its trainer was replaced.
bool is_stale_incarnation(const grpc::Status& status);

}  // namespace cifar::ps
