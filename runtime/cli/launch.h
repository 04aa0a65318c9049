// `cifar-train launch -n N <train flags>`: runs N ranks of an all-reduce job on this machine (as
// torchrun does), each a child process of the same binary with MASTER_ADDR, MASTER_PORT,
// WORLD_SIZE, RANK and LOCAL_RANK set. The first rank that fails stops the others; the exit code
// is the first failure's (0 when all succeed).
#pragma once

namespace cifar::cli {

// argv[1] is "launch". Returns the process exit code.
int launch_local_ranks(int argc, const char* const argv[]);

}  // namespace cifar::cli
