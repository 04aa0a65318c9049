// `cifar-train rendezvous-store [--port P]`: hosts the c10d store an elastic all-reduce job's
// ranks meet at (distributed/allreduce/rendezvous.h), until SIGTERM or SIGINT. A process of its
// own, so that the loss of any rank, rank 0 included, leaves the others a place to meet.
#pragma once

namespace cifar::cli {

// argv[1] is "rendezvous-store". Returns the process exit code.
int serve_rendezvous_store(int argc, const char* const argv[]);

}  // namespace cifar::cli
