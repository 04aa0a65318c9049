#!/usr/bin/env bash
# Installs what the build, the tests, the demo and the benchmarks need. Idempotent: packages
# already present are skipped, so a second run costs one dpkg query.
#
#   scripts/install-deps.sh         everything (`make test`, `make bench`, the local cluster)
#   scripts/install-deps.sh demo    only what `make demo` needs: the toolchain, the runtime's
#                                   libraries (cifar-train alone is built) and the data decoder
set -euo pipefail
group=${1:-all}
case $group in
  all | demo) ;;
  *)
    echo "install-deps.sh: unknown group '$group' (all | demo)" >&2
    exit 2
    ;;
esac

# What building cifar-train and running the demo needs.
DEMO_PACKAGES=(
  # toolchain
  build-essential cmake ninja-build ccache pkg-config curl openssl
  # runtime: LibTorch (CPU) and c10d's Gloo headers
  libtorch-dev libgloo-dev
  # Not libopenblas0-*: its 60 KB of static TLS, with glog's and torch's, no longer fits the
  # fixed 100 KB thread stacks of Debian's civetweb, so prometheus-cpp's endpoint cannot start
  # (pthread_create EINVAL). Convolutions run in oneDNN, so the reference BLAS costs little.
  # runtime libraries
  libcli11-dev nlohmann-json3-dev libspdlog-dev libfmt-dev prometheus-cpp-dev
  libcurl4-openssl-dev libarchive-dev libssl-dev zlib1g-dev libpugixml-dev
  # the stall report's stacks: libunwind walks them, elfutils' libdw names them
  libunwind-dev libdw-dev
  # parameter server: gRPC + protobuf
  libgrpc++-dev protobuf-compiler-grpc protobuf-compiler libprotobuf-dev
  # real data: CIFAR-10's JPEG copy beside the repository is decoded with PIL
  # (scripts/cifar10-data.sh); Fashion-MNIST is the demo's fallback
  python3 python3-pil dataset-fashion-mnist
)

# What the rest needs: the operator, the tests, the local cluster, the benchmarks.
MORE_PACKAGES=(
  clang-format clang-tidy
  # operator: Kubernetes client over HTTP (cpprestsdk), kubeconfig (yaml-cpp)
  libcpprest-dev libyaml-cpp-dev
  # tests
  libgtest-dev libgmock-dev googletest python3-yaml
  # Grafana's dashboard SDK lives in a venv (deploy/grafana/setup-sdk.sh)
  python3-venv
  # the local cluster of the end-to-end tests (deploy/local-cluster): container runtime, CNI
  # plugins, kube-proxy's iptables, and the image builder (no registry: a base from mmdebstrap)
  containerd runc containernetworking-plugins iptables conntrack podman buildah mmdebstrap
  # kind on podman (deploy/kind): podman's name resolution between containers (kind's nodes find
  # the control plane by name); jq for the node image build
  golang-github-containernetworking-plugin-dnsname jq
  # the PyTorch side of side-by-side benchmarks (belongs to /usr/bin/python3)
  python3-torch python3-torchvision
)

wanted=("${DEMO_PACKAGES[@]}")
[ "$group" = demo ] || wanted+=("${MORE_PACKAGES[@]}")

missing=()
for p in "${wanted[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  echo "install-deps: every package of group $group is present"
fi

[ "$group" = demo ] && exit 0

# Grafana's dashboard SDK (deploy/grafana/dashboard.py, ctest Grafana.Dashboard): pip, into a venv
# outside the repository; a no-op once installed.
bash "$(dirname "$0")/../deploy/grafana/setup-sdk.sh" >/dev/null

# Not from apt: Debian 12's Go (1.19) is older than the pinned modules' `go` lines, and it has no
# kubectl. The machines this project runs on come with both; say so plainly where they do not.
go_needed=1.26
if ! go_version=$(go env GOVERSION 2>/dev/null); then
  echo "install-deps: no 'go' on PATH: the local cluster and the test tools are built from Go" \
    "modules with Go $go_needed or newer" >&2
  exit 1
fi
if [ "$(printf '%s\n' "go$go_needed" "$go_version" | sort -V | head -1)" != "go$go_needed" ]; then
  echo "install-deps: $go_version is older than the Go $go_needed the pinned modules need" >&2
  exit 1
fi
if ! command -v kubectl >/dev/null; then
  echo "install-deps: no 'kubectl' on PATH: the tests and the local cluster use it" >&2
  exit 1
fi
