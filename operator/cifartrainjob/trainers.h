// A job that trains with fewer trainers than it names, from status.progress.trainers (its PS 0's
// word, progress.h): a trainer the parameter server dropped mid-run (silent past the PS's
// timeout: its pod or node gone), or one an asynchronous job started without. A synchronous job
// never starts without all of them (the PS waits), so nothing is said before the job's first step.
// Reported while the job goes on (condition TrainersMissing and an Event) and in the message the
// job ends with.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "api/job.h"
#include "cifartrainjob/plan.h"
#include "framework/clock.h"

namespace cifar::op {

struct MissingTrainers {
  bool all_training = false;  // PS 0's word (status.progress.trainers): none is missing
  int training = 0;
  int expected = 0;
  bool any_dropped = false;
  // "j-worker-0 dropped at step 120, j-worker-1 has not joined"; "" when every trainer trains,
  // nothing is known, or no step was taken yet.
  std::string who;
};
MissingTrainers missing_trainers(const Job& job, const nlohmann::json& progress);

// Condition TrainersMissing True ("j-worker-0 dropped at step 120; training on with 1 of 2
// trainers", reason TrainerDropped, else TrainerNotJoined) with a Warning Event when that is news,
// and False with a Normal Event once every trainer trains again. Nothing while nothing is known.
void report_missing_trainers(const Job& job, Clock::time_point now, Plan& plan);

// What a job's final message adds when it ended with fewer trainers than it names: "; it ended
// with 1 of 2 trainers: j-worker-0 dropped at step 120", else "".
std::string ended_with_fewer_trainers(const Job& job, const nlohmann::json& progress);

}  // namespace cifar::op
