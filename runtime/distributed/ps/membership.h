// Which incarnation of each trainer a parameter server serves (train/fence.h has the numbers: the
// operator gives every pod it creates a larger one than any before). A trainer names itself on
// every call ("cifar-member: <rank>@<incarnation>", transport.h); the PS remembers the newest
// incarnation it has seen of each rank and refuses calls from older ones with FAILED_PRECONDITION
// and ShardError.STALE_INCARNATION, so that a trainer left running on a cut-off node never
// trains against the job's parameters beside its replacement once the replacement has reached
// this PS. Calls that name no incarnation (a trainer run without one) are served as before.
//
// The other way round, a trainer never trains against a PS older than the one it was created
// with: it names on every call the incarnation it expects of the PS (the PS pod's as the operator
// created the trainer, env CIFAR_PS_INCARNATIONS; "cifar-ps-incarnation: N"). A PS of an older
// incarnation (left running on a cut-off node while its replacement serves) refuses the call with
// FAILED_PRECONDITION and ShardError.STALE_PARAMETER_SERVER and stops; the trainer waits for the
// replacement as for a PS that is down.
#pragma once

#include <grpcpp/support/status.h>

#include <atomic>
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

// This PS's incarnation (0: none) against the one each call expects of it.
class PsIncarnation {
 public:
  explicit PsIncarnation(int64_t own) : own_(own) {}
  // OK, or refused when `expected` (the call's metadata) is newer than this PS: from then on
  // replaced_by() says by which incarnation. Malformed metadata: INVALID_ARGUMENT.
  grpc::Status admit(std::string_view expected);
  // The newest incarnation a call expected of this PS above its own; nullopt: none yet.
  [[nodiscard]] std::optional<int64_t> replaced_by() const;

 private:
  int64_t own_;
  std::atomic<int64_t> replaced_by_{0};
};

// Whether a call was refused because the PS is older than the trainer expected.
bool is_stale_parameter_server(const grpc::Status& status);

}  // namespace cifar::ps
