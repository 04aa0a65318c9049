// The parameter-server strategy's options (distributed/ps/), as the command line (cli/) fills them.
// No torch and no gRPC, so the CLI compiles fast; the names are the flags' values.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "contract/enum_names.h"

namespace cifar::ps {

// How a shard applies pushed gradients (distributed/ps/shard_mode.h; one file per mode in modes/).
enum class Mode {
  kSync,        // wait for every trainer's gradient, average, apply once, answer all
  kAsync,       // apply each push at once under a lock, answer with the fresh parameters
  kAsyncReply,  // answer with the current parameters at once, apply the queued gradient after
  kHogwild,     // apply without any lock, answer at once
  kSsp,         // like async, but a trainer more than `staleness` pushes ahead of the slowest waits
};
inline constexpr contract::EnumNames<Mode, 5> kModeNames{{
    {"sync", Mode::kSync},
    {"async", Mode::kAsync},
    {"async-reply", Mode::kAsyncReply},
    {"hogwild", Mode::kHogwild},
    {"ssp", Mode::kSsp},
}};
inline std::string mode_name(Mode mode) { return contract::name_of(kModeNames, mode); }
// Throws std::invalid_argument naming the modes.
inline Mode parse_mode(std::string_view name) {
  return contract::parse_named(kModeNames, name, "PS mode");
}

// Gradients and parameters on the wire.
enum class WireDType { kFp32, kFp16, kBf16 };
inline constexpr contract::EnumNames<WireDType, 3> kWireDTypeNames{{
    {"fp32", WireDType::kFp32},
    {"fp16", WireDType::kFp16},
    {"bf16", WireDType::kBf16},
}};

// The most stripes a PS serves its share as (distributed/ps/layout.h): the bound of --ps-stripes,
// and how many a PS makes ready.
inline constexpr int kMaxStripes = 4;

struct Options {
  Mode mode = Mode::kSync;
  int64_t staleness = 3;        // ssp: how many updates a trainer may run ahead of the slowest
  bool staleness_lr = false;    // divide the learning rate of a stale gradient by its staleness
  double timeout_seconds = 30;  // sync/ssp: a trainer silent this long leaves the round
  // An elastic job (> 0; docs/ARCHITECTURE.md, "Elastic jobs"): the workers TF_CONFIG lists are
  // the most there can be; a trainer is a member once it registers and until it leaves, and a
  // synchronous update takes at least this many trainers (the master counts).
  int min_trainers = 0;
  WireDType wire_dtype = WireDType::kFp32;
  int stripes = 0;               // per PS (ps/layout.h); 0: one per 256 KiB of its share
  int64_t max_message_mb = 512;  // larger gRPC messages are refused
  double retry_seconds = 120;    // how long a trainer retries an unreachable PS
  std::string token;  // shared secret of the job's members (env CIFAR_PS_TOKEN); empty: none
  // The job's TLS credentials (ca.crt, tls.crt, tls.key: security/tls_dir.h; env CIFAR_TLS_DIR):
  // every channel between trainers and parameter servers is mutual TLS with them. A PS job needs
  // them unless `insecure` (--insecure: plaintext, for benchmarks).
  std::string tls_dir;
  bool insecure = false;
};

}  // namespace cifar::ps
