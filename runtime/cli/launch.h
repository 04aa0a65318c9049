// `cifar-train launch -n N <train flags>`: runs N ranks of an all-reduce job on this machine (as
// torchrun does), each a child process of the same binary with MASTER_ADDR, MASTER_PORT,
// WORLD_SIZE, RANK and LOCAL_RANK set. The first rank that fails stops the others; the exit code
// is the first failure's (0 when all succeed).
//
// An elastic job (--min-ranks among the ranks' flags): N is its most ranks; their store is a
// `cifar-train rendezvous-store` child of its own at MASTER_PORT, which outlives any rank, and
// each rank gets CIFAR_INCARNATION as a pod does. A rank killed by a signal (128 + N) is started
// again while the others train on (it joins them at a step boundary), up to --max-restarts times
// over the job; a rank that fails otherwise is left out while at least --min-ranks train on, and
// stops them all below that. The job succeeds when a rank finishes it (exit 0).
#pragma once

namespace cifar::cli {

// argv[1] is "launch". Returns the process exit code.
int launch_local_ranks(int argc, const char* const argv[]);

}  // namespace cifar::cli
