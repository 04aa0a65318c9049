#!/usr/bin/env bash
# Runs a whole parameter-server job as local processes, the way the seed projects do: the PS
# shards, the master, the workers and an evaluator, each `cifar-train --distributed --dist-type
# <role>` with the same flags. Every log line names its process; the master shows progress. The
# processes talk mutual TLS with credentials made for the job (--insecure: plaintext).
#
# Usage: scripts/local-job.sh [--bin PATH] [--ps N] [--workers N] [--port P] [--no-evaluator]
#                             -- <cifar-train flags shared by all processes>
# Exits 0 when every process did; on a failure (or Ctrl-C) stops the others and exits 1.
set -euo pipefail
bin=build/bin/cifar-train
ps_count=1
workers=2
port=7000
evaluator=1
while (($#)); do
  case "$1" in
    --bin) bin=$2; shift 2 ;;
    --ps) ps_count=$2; shift 2 ;;
    --workers) workers=$2; shift 2 ;;
    --port) port=$2; shift 2 ;;
    --no-evaluator) evaluator=0; shift ;;
    --) shift; break ;;
    *) echo "local-job: unknown option $1 (see the usage at the top of $0)" >&2; exit 2 ;;
  esac
done
common=(--distributed --ps-count "$ps_count" --worker-count "$workers" --dist-start-port "$port"
        "$@")
# The PS channel is mutual TLS: unless the flags give the job's credentials (--tls-dir) or turn TLS
# off (--insecure), credentials are made for this job (`cifar-train certs`), removed at its end.
tls_dir=""
trap '[ -z "$tls_dir" ] || rm -rf "$tls_dir"' EXIT
if [[ " $* " != *" --tls-dir "* && " $* " != *" --tls-dir="* && " $* " != *" --insecure "* &&
      -z "${CIFAR_TLS_DIR:-}" ]]; then
  tls_dir=$(mktemp -d "${TMPDIR:-/tmp}/cifar-job-tls.XXXXXX")
  # A binary from before TLS (bench/compare_builds.sh runs old builds) has no `certs` and speaks
  # plaintext; a current one that could not make them stops, saying what it needs.
  if "$bin" certs --out "$tls_dir" >/dev/null 2>&1; then
    common+=(--tls-dir "$tls_dir")
  fi
fi

declare -A name_of  # the pid of each process still running -> its name
start() {  # start <name> <cifar-train flags...>
  local name=$1
  shift
  # Progress lines carry no prefix of their own; tag them with the process's name.
  "$bin" "${common[@]}" "$@" > >(sed -u "/^\[/!s/^/[$name] /") 2>&1 &
  name_of[$!]=$name
}
stop_all() {
  for pid in "${!name_of[@]}"; do kill "$pid" 2>/dev/null || true; done
}
trap 'stop_all; exit 130' INT TERM

for ((i = 0; i < ps_count; i++)); do start "ps $i" --dist-type ps --ps-index "$i" --progress none; done
start "master 0" --dist-type master
for ((i = 0; i < workers; i++)); do
  start "worker $i" --dist-type worker --worker-index "$i" --progress none
done
((evaluator)) && start "evaluator 0" --dist-type evaluator --progress none

# React to the first process that fails: the PS and the evaluator only end when the master ends
# the job, so waiting for them in order would hang after a trainer's failure. Each process is
# waited for once (a second wait on a reaped pid is bash's "no such job").
status=0
while ((${#name_of[@]})); do
  code=0
  wait -n -p done_pid "${!name_of[@]}" || code=$?
  name=${name_of[$done_pid]}
  unset "name_of[$done_pid]"
  if ((code != 0)); then
    echo "local-job: $name failed (exit $code); stopping the job" >&2
    status=1
    stop_all
    break
  fi
done
wait || true
exit $status
