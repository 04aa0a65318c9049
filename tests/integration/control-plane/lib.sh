# Shell helpers of the start scripts (sourced): this control plane's and the one-node cluster's.
# wait_for reads the log of what it waits for from $log_dir/<what>.log.

# A TCP port on 127.0.0.1 that was free a moment ago.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# wait_for WHAT SECONDS COMMAND...: until COMMAND succeeds; else the end of WHAT's log, and exit 1.
wait_for() {
  local what=$1 seconds=$2
  shift 2
  for _ in $(seq $((seconds * 5))); do
    "$@" >/dev/null 2>&1 && return
    sleep 0.2
  done
  echo "start.sh: $what did not come up within ${seconds}s; the end of its log:" >&2
  tail -30 "$log_dir/$what.log" >&2 || true
  exit 1
}
