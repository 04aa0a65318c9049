# shellcheck shell=bash
# Shell helpers of the local cluster's scripts and of the operator's bare control plane (sourced).
# wait_for reads the log of what it waits for from $log_dir/<what>.log; spawn writes it there and
# records the daemon's pid in $dir/pids (for stop.sh, which stops daemons by pid, never by name).
# shellcheck disable=SC2154 # dir, log_dir: the caller's

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
  echo "$(basename "$0"): $what did not come up within ${seconds}s; the end of its log:" >&2
  tail -30 "$log_dir/$what.log" >&2 || true
  exit 1
}

# spawn NAME COMMAND...: runs COMMAND in the background, its output in $log_dir/NAME.log, and
# "PID NAME" appended to $dir/pids.
spawn() {
  local name=$1
  shift
  "$@" >>"$log_dir/$name.log" 2>&1 &
  echo "$! $name" >>"$dir/pids"
}

# pids_of NAME: the pids spawn recorded under NAME (several if it was started again).
pids_of() { awk -v n="$1" '$2 == n {print $1}' "$dir/pids" 2>/dev/null; }

# node_indexes: the local cluster's nodes with a daemon in $dir/pids (node.sh names them
# nodeINDEX-DAEMON), each index once, in order.
node_indexes() { sed -n 's/^[0-9]* node\([0-9]*\)-.*/\1/p' "$dir/pids" 2>/dev/null | sort -un; }

# stop_daemon NAME [SIGNAL]: SIGTERM (or SIGNAL), up to 10 s, then SIGKILL; its lines leave pids.
stop_daemon() {
  local name=$1 signal=${2:-TERM} pid
  for pid in $(pids_of "$name"); do
    if kill -s "$signal" "$pid" 2>/dev/null; then
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
      kill -9 "$pid" 2>/dev/null || true
    fi
  done
  [ -f "$dir/pids" ] && sed -i "/ $name\$/d" "$dir/pids"
  return 0
}
