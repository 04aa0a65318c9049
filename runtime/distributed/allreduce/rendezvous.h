// How the ranks of an all-reduce job find each other, and find each other again after one was
// lost: rounds in the c10d TCPStore that rank 0 hosts (MASTER_ADDR:MASTER_PORT), as torchrun's
// elastic agent forms its groups.
//
// Every rank joins the store's current round and waits there until all the ranks have; their
// group is then built under that round's prefix. When a group breaks (PeerLost: a rank died or
// was cut off), the ranks left move to the next round and wait for the lost rank's replacement
// inside the process, for up to --rendezvous-timeout, instead of exiting into the kubelet's
// restart back-off. A replacement that arrives before its peers found the old group broken joins
// that round, finds it full, and moves everyone on. When rank 0 itself is replaced, its store is
// a new one (another id), whose rounds the ranks left join from the start.
//
// An elastic job (Options::min_world_size) meets at a store of its own (rendezvous-store): a
// round closes with the ranks that joined it, at least the minimum, once none joined for the
// settle time (or at the maximum), and each rank's place in the group is the order it joined in.
// A rank that comes after a round closed waits (must_reform() tells the group's rank 0, which
// brings the group to the next round at a step boundary), unless the group stopped beating.
//
// An elastic rank asked to leave while it waits (a scale-down's SIGTERM) takes itself out: from a
// round still open it closes the round as abandoned and moves the store on, so that the others
// form the next at once rather than build a group with a rank that is gone (and wait out the
// collective timeout for it); from a round that closed with it, it forms the group, and leaves at
// its first step boundary, as a stop asked while training does.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "distributed/allreduce/group_beat.h"
#include "distributed/allreduce/process_group.h"  // the groups it forms, c10d's declarations

namespace cifar::allreduce {

// The longest the ranks of a closed round wait for each other's addresses as their group forms
// (at most the collective timeout): they were all at the store a moment before, so a rank whose
// address does not come within it is gone (lost as the round closed), and the others give that
// group up and form the next round's rather than wait the collective timeout for it.
inline constexpr std::chrono::seconds kFormationBound{15};

// form() left the rendezvous: its rank was asked to leave while it waited for a group.
struct LeftTheRendezvous : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Rendezvous {
 public:
  Rendezvous(Options options, Backend backend);
  Rendezvous(const Rendezvous&) = delete;
  Rendezvous& operator=(const Rendezvous&) = delete;
  ~Rendezvous();

  // A group with every rank in it: the first, or, after broken(), the next. `between_tries` runs
  // while it waits (the fence: a rank replaced meanwhile stops instead of waiting on). Throws
  // std::runtime_error when none formed within the rendezvous timeout. Elastic jobs: `leaving`
  // (checked while it waits) says the rank is asked to leave; it then throws LeftTheRendezvous,
  // unless the round it joined closed with it (see above).
  c10::intrusive_ptr<c10d::ProcessGroup> form(const std::function<void()>& between_tries,
                                              std::function<bool()> leaving = {});

  // The group form() returned last is broken: the next form() joins a later round.
  void broken();

  // The round of the group form() returned last (-1 before the first).
  [[nodiscard]] int64_t round() const { return current_ ? current_->number : -1; }
  // The same as one number that only grows, over every store the job met at
  // (rendezvous_keys::generation; -1 before the first group).
  [[nodiscard]] int64_t generation() const;

  // Elastic jobs, at a step boundary: whether the group must form again (ranks wait to join it,
  // the store moved on or is a new one: group_beat.h).
  [[nodiscard]] bool must_reform() const;

  // Elastic jobs, while a collective waits: a peer of the group that stopped beating at the store
  // (group_beat.h), said for an error; nullopt otherwise.
  [[nodiscard]] std::optional<std::string> silent_peer() const;

  // Hosts a store for the rounds of an elastic job at host:port (rendezvous-store), for as long as
  // the returned store lives.
  static c10::intrusive_ptr<c10d::Store> host_store(const std::string& host, int port);

 private:
  struct Round {
    std::string store_id;
    int64_t number = 0;
  };
  c10::intrusive_ptr<c10d::Store> connect(std::chrono::milliseconds timeout);
  c10::intrusive_ptr<c10d::ProcessGroup> try_round(std::chrono::steady_clock::time_point deadline,
                                                   const std::function<void()>& between_tries);
  // The number of ranks of `round`, once it closed (nullopt: the store moved on to another).
  std::optional<int64_t> close_round(c10d::Store& store, int64_t round, int64_t joined,
                                     std::chrono::steady_clock::time_point deadline,
                                     const std::function<void()>& between_tries) const;
  // A rank that came after `round` closed, in an elastic job: waits until its group moves on (or
  // stopped beating: then moves the store on itself).
  void wait_for_the_next_round(c10d::Store& store, int64_t round,
                               std::chrono::steady_clock::time_point deadline,
                               const std::function<void()>& between_tries) const;
  // Asked to leave while in `round`, which it joined as the `joined`th: the round's size if it
  // closed with this rank (which then forms its group); throws LeftTheRendezvous otherwise, having
  // closed the round as abandoned (0 ranks) and moved the store on if it was still open.
  int64_t leave_round(c10d::Store& store, int64_t round, int64_t joined) const;
  [[nodiscard]] bool elastic() const { return options_.min_world_size > 0; }
  [[nodiscard]] bool asked_to_leave() const { return leaving_ && leaving_(); }

  Options options_;
  Backend backend_;
  c10::intrusive_ptr<c10d::Store> server_;  // rank 0's store, for as long as the process lives
  std::optional<Round> current_;            // the round of the group form() returned last
  c10::intrusive_ptr<c10d::ProcessGroup> current_group_;
  std::unique_ptr<GroupBeat> beat_;  // elastic jobs: while the group of current_ lasts
  std::optional<Round> broken_;      // a round whose group broke: the next is wanted
  std::function<bool()> leaving_;    // form()'s, while it runs
  std::vector<c10::intrusive_ptr<c10d::ProcessGroup>> broken_groups_;
};

}  // namespace cifar::allreduce
