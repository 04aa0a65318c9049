#!/bin/sh
# The pod network of a kind cluster whose node image was built here (build-node-image.sh): what
# kind's own kindnetd does for routing, which cannot be built here (its module is not served).
# On each node, from the Node objects: the CNI config that gives this node's pods addresses of its
# podCIDR (ptp + host-local, kind's own plugins), and a route to every other node's podCIDR via
# that node's address. The nodes share one container network, so a route is all it takes; no
# masquerade (the cluster reaches nothing outside itself here), no NetworkPolicy enforcement.
# Runs as the DaemonSet of default-cni.yaml, hostNetwork, with NODE_NAME set.
set -eu
: "${NODE_NAME:?NODE_NAME is not set (the DaemonSet's downward API)}"
conf=/etc/cni/net.d/10-podroutes.conflist
interval=${INTERVAL:-5}

while :; do
  cidr=$(kubectl get node "$NODE_NAME" -o jsonpath='{.spec.podCIDR}' || true)
  if [ -n "$cidr" ]; then
    want=$(printf '{"cniVersion":"1.0.0","name":"podroutes","plugins":[{"type":"ptp","ipMasq":false,"mtu":1500,"ipam":{"type":"host-local","dataDir":"/run/cni-ipam-state","routes":[{"dst":"0.0.0.0/0"}],"ranges":[[{"subnet":"%s"}]]}},{"type":"portmap","capabilities":{"portMappings":true}}]}' "$cidr")
    if [ "$(cat "$conf" 2>/dev/null || true)" != "$want" ]; then
      printf '%s\n' "$want" >"$conf.partial" && mv "$conf.partial" "$conf"
      echo "podroutes: $NODE_NAME's pods get addresses of $cidr"
    fi
  fi
  kubectl get nodes -o jsonpath='{range .items[*]}{.metadata.name} {.spec.podCIDR} {.status.addresses[?(@.type=="InternalIP")].address}{"\n"}{end}' |
    while read -r name pods address; do
      [ "$name" != "$NODE_NAME" ] && [ -n "$pods" ] && [ -n "$address" ] || continue
      # An address of each family: the route must be in the podCIDR's.
      case $pods in *:*) address=$(echo "$address" | tr ' ' '\n' | grep : | head -1) ;; *) address=${address%% *} ;; esac
      case $(ip route show "$pods" 2>/dev/null) in
        *"via $address "*) ;;
        *) ip route replace "$pods" via "$address" && echo "podroutes: $pods via $address ($name)" ;;
      esac
    done || true
  sleep "$interval"
done
