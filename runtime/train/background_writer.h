// Writes objects of a run in the background, one at a time and in order, so that the training
// thread hands a checkpoint (or the monitor log) over and trains on, whether the store takes a
// second or, riding out an outage (storage/retrying_store.h), minutes. Memory stays bounded:
// behind the write in progress waits at most one, and a newer one takes its place (a resume wants
// the newest checkpoint; a log is written whole each time).
//
// A write that fails for good (a store that refuses, one away longer than the job allows, a
// replaced chief: any exception) is kept and thrown on the training thread by its next call, so
// the process ends with that error; what waits behind it is dropped.
//
// Closed, a checkpoint writer drops what waits (a newer state is held in memory or saved by the
// next process); a log's writer writes it too, within the same grace: a record handed over and
// then lost (a round of an elastic job that ends right after an epoch's record) is not redone.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace cifar::train {

struct PendingWrite {
  std::string name;
  std::string bytes;
  int64_t step = 0;
};

class BackgroundWriter {
 public:
  static constexpr std::chrono::seconds kGraceOnClose{5};

  // Writes one object into the store (a checkpoint: and rotates old ones out); throws if it
  // cannot.
  using Commit = std::function<void(const PendingWrite&)>;
  enum class OnClose { kDropWaiting, kWriteWaiting };

  explicit BackgroundWriter(Commit commit, OnClose on_close = OnClose::kDropWaiting);
  // What waits is dropped, or (kWriteWaiting) written too; what is written then gets
  // kGraceOnClose to finish, then its store requests are cancelled (storage/cancellation.h), so
  // that no write outlives its process's main(): the thread is joined here.
  ~BackgroundWriter();
  BackgroundWriter(const BackgroundWriter&) = delete;
  BackgroundWriter& operator=(const BackgroundWriter&) = delete;

  // Hands `write` over (replacing one that had not started yet). Throws an earlier failure.
  void submit(PendingWrite write);
  // Until everything handed over is written; throws the failure if something was not.
  void wait_until_saved();
  // The same for at most `at_most`: whether everything is written.
  bool wait_until_saved(std::chrono::milliseconds at_most);
  // Throws the failure of a write, if one failed.
  void raise_if_failed();

  // The step of the newest write done (nullopt: none yet), and of the one waiting or being
  // written (nullopt: all written).
  [[nodiscard]] std::optional<int64_t> saved_step() const;
  [[nodiscard]] std::optional<int64_t> unsaved_step() const;

 private:
  struct State;
  static void run(State& state);

  OnClose on_close_;
  std::unique_ptr<State> state_;
  std::thread thread_;
};

}  // namespace cifar::train
