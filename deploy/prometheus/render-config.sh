#!/usr/bin/env bash
# Prints the Prometheus configuration (prometheus.yml beside this script, or CONFIG) made for a
# Prometheus that runs outside the cluster: every kubernetes_sd_configs entry gains
# `kubeconfig_file: KUBECONFIG` (the API server and credentials to discover pods with, instead of
# the in-cluster service account), and relative rule_files become absolute (they are resolved
# against the directory of the file Prometheus loads, which the output will not share).
# Pod IPs must be reachable from where Prometheus runs (on the local cluster they are: node 1's
# bridge 10.244.0.0/24 is on the host, and the host routes to the other nodes' pod networks).
#   deploy/prometheus/render-config.sh KUBECONFIG [CONFIG] > prometheus-host.yml
#   prometheus --config.file=prometheus-host.yml
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
usage="usage: render-config.sh KUBECONFIG [CONFIG] > OUT.yml"
kubeconfig=${1:?$usage}
config=${2:-$here/prometheus.yml}
[ -f "$kubeconfig" ] || { echo "render-config.sh: no kubeconfig '$kubeconfig'" >&2; exit 1; }
[ -f "$config" ] || { echo "render-config.sh: no config '$config'" >&2; exit 1; }
kubeconfig=$(cd "$(dirname "$kubeconfig")" && pwd)/$(basename "$kubeconfig")
config_dir=$(cd "$(dirname "$config")" && pwd)
# kubeconfig_file excludes api_server and in-cluster settings: one already there is a conflict
# this script cannot settle.
if grep -Eq '^[[:space:]]*(kubeconfig_file|api_server):' "$config"; then
  echo "render-config.sh: $config already names kubeconfig_file or api_server" >&2
  exit 1
fi
quote() { printf "'%s'" "${1//\'/\'\'}"; }  # a YAML single-quoted scalar

# A line-based edit (no YAML tool needed, comments kept), which relies on block-style YAML as in
# prometheus.yml: a `kubernetes_sd_configs:` key, then its list items `- ...` one level deeper;
# `rule_files:` at the top level with `- PATH` items. promtool check config checks the result.
awk -v kubeconfig="$(quote "$kubeconfig")" -v dir="$config_dir" -v q="'" '
  function indent(s) { match(s, /^ */); return RLENGTH }
  {
    line = $0
    blank = line ~ /^[[:space:]]*(#.*)?$/
    # Leaving a block: a non-blank line no deeper than the key that opened it.
    if (in_sd && !blank && indent(line) <= sd_indent) in_sd = 0
    if (in_rules && !blank && indent(line) == 0 && line !~ /^- /) in_rules = 0
    if (in_rules && match(line, /^[[:space:]]*- /)) {
      path = substr(line, RLENGTH + 1)
      gsub("^[\"" q "]|[\"" q "][[:space:]]*$", "", path)
      if (path !~ /^\//) line = substr(line, 1, RLENGTH) q dir "/" path q
    }
    print line
    if (in_sd && match(line, /^ *- /)) {
      if (item_indent < 0) item_indent = RLENGTH - 2
      if (RLENGTH - 2 == item_indent) {
        printf "%*s%s\n", item_indent + 2, "", "kubeconfig_file: " kubeconfig
        added++
      }
    }
    if (line ~ /^[[:space:]]*kubernetes_sd_configs:[[:space:]]*$/) {
      in_sd = 1; sd_indent = indent(line); item_indent = -1
    }
    if (line ~ /^rule_files:[[:space:]]*$/) in_rules = 1
  }
  END {
    if (!added) { print "render-config.sh: no kubernetes_sd_configs entry found" > "/dev/stderr"; exit 1 }
  }
' "$config"
