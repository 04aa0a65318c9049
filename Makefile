# The two commands of the README: `make demo` and `make test`. Each installs what is missing
# (scripts/install-deps.sh is idempotent), builds, then runs.
BUILD_DIR ?= build
JOBS ?= 2
# ctest's -j: the two cores of these machines (the suite is bound by them: docs/TESTING.md).
TEST_JOBS ?= 2
WERROR ?= ON

.PHONY: all deps configure build control-plane node kueue tools go-parts go-node go-kueue \
        fake-gpu-plugin images cluster cluster-stop cluster-sim cluster-sim-stop test test-kind \
        demo bench format tidy chart-files clean

all: build

deps:
	bash scripts/install-deps.sh

CMAKE_CONFIGURE = cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCIFAR_WERROR=$(WERROR)
configure: deps
	$(CMAKE_CONFIGURE) -DCIFAR_BUILD_OPERATOR=ON -DCIFAR_BUILD_TESTS=ON -DCIFAR_BUILD_BENCH=ON

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

# The local cluster (deploy/local-cluster): its etcd + kube-apiserver (also the operator's
# integration tests' control plane), built from their Go modules and cached outside the repo
# (10-20 minutes the first time, nothing after), and the nodes' parts (kubelet, scheduler,
# controller-manager, kube-proxy, CoreDNS), built alike and cached beside them (~10 minutes).
control-plane: deps
	bash deploy/local-cluster/build.sh

node: deps
	bash deploy/local-cluster/build.sh node

# The local cluster's fake GPUs' device plugin (C++, against the kubelet's device plugin API from
# its Go module), cached alike (~1 minute the first time).
fake-gpu-plugin: deps
	bash deploy/local-cluster/build-fake-gpu-plugin.sh >/dev/null

# Kueue's manager (sigs.k8s.io/kueue, pinned in deploy/local-cluster/modules/kueue), cached alike
# (~3 minutes the first time); deploy/local-cluster/kueue.sh installs it on the local cluster.
kueue: deps
	bash deploy/local-cluster/build-kueue.sh

# The tools from their Go modules, cached like the control plane (deploy/tools/build.sh; the local
# cluster and the tests use them): Helm, Prometheus + promtool, kind (and its config checker),
# SeaweedFS (the object store of the storage tests and of S3=1), the nodes' NetworkPolicy agent
# (kube-network-policies), the Prometheus Operator's CRDs.
TOOLS = helm prometheus kind seaweedfs kube-network-policies hangfs prometheus-operator-crds
TOOL_TARGETS = $(addprefix go-tool-,$(TOOLS))
.PHONY: $(TOOL_TARGETS)
tools: $(TOOL_TARGETS)
$(TOOL_TARGETS): go-tool-%: deps
	bash deploy/tools/build.sh $* >/dev/null

# The runtime and operator images, from this build's two binaries alone (not the tests and
# benchmarks a cluster does not use); `scripts/build-images.sh` without --prebuilt compiles inside
# the image instead (the Dockerfile's full multi-stage build).
images: configure
	cmake --build $(BUILD_DIR) -j $(JOBS) --target cifar-train cifar-operator
	bash scripts/build-images.sh --prebuilt $(BUILD_DIR) --out $(BUILD_DIR)/images

# The local cluster, a real one of NODES nodes (1-8; NODES=2: two kubelets, each with its own
# containerd, network and cgroups) with the CRD and the operator installed (root; one at a time per
# machine); it prints how to point kubectl at it. KUEUE=1 installs Kueue on it too. S3=1 starts
# an object store on node 1's bridge, http://10.244.0.1:8333 with the bucket `checkpoints` and
# CIFAR-10's binary files in it under data/cifar10 (deploy/local-cluster/object-store.sh), which
# deploy/examples/s3-ps-job.yaml uses for both. `make cluster-stop` stops it and
# cleans up. GPUS=G (NODES=2 or more) gives every node but node 1 G fake nvidia.com/gpu (a device
# plugin advertises devices that are not there; pods that ask for them run on the CPU), GPU_TAINT=1
# taints those nodes nvidia.com/gpu:NoSchedule.
NODES ?= 1
GPUS ?= 0
GPU_TAINT ?= 0
KUEUE ?= 0
S3 ?= 0
# Only what the cluster and its flags use: start.sh builds its own tools (Helm, the NetworkPolicy
# agent) and, with GPUS, the fake GPU plugin; S3=1 builds SeaweedFS.
cluster: images node $(if $(filter 1,$(KUEUE)),kueue)
	bash deploy/local-cluster/start.sh --nodes $(NODES) --gpus $(GPUS) \
	  $(if $(filter 1,$(GPU_TAINT)),--gpu-taint) $(BUILD_DIR)/cluster $(BUILD_DIR)/images
	if [ "$(KUEUE)" = 1 ]; then bash deploy/local-cluster/kueue.sh $(BUILD_DIR)/cluster; fi
	if [ "$(S3)" = 1 ]; then bash deploy/local-cluster/object-store.sh $(BUILD_DIR)/object-store; fi

cluster-stop:
	bash deploy/object-store/stop.sh $(BUILD_DIR)/object-store
	bash deploy/local-cluster/stop.sh $(BUILD_DIR)/cluster

# A simulated GPU fleet (deploy/sim-cluster): the local cluster's one real node running the operator
# (and Kueue with KUEUE=1), and NODES nodes (default 1000) of 8 GPUs each that kwok simulates,
# whose pods run (and chiefs succeed) without a process. For measuring the operator at scale.
SIM_NODES = $(if $(filter command line environment,$(origin NODES)),$(NODES),1000)
cluster-sim: images node $(if $(filter 1,$(KUEUE)),kueue)
	bash deploy/sim-cluster/start.sh --nodes $(SIM_NODES) $(if $(filter 1,$(KUEUE)),--kueue) \
	  $(BUILD_DIR)/cluster-sim $(BUILD_DIR)/images

cluster-sim-stop:
	bash deploy/local-cluster/stop.sh $(BUILD_DIR)/cluster-sim

# Every Go part the tests use (and the fake GPU plugin, whose API comes from a Go module), each its own target so that `make -j` builds them side by side:
# go-node includes the control plane (whose build shares a staging directory with it). Go's module
# and build caches are safe to share between concurrent builds.
GO_PARTS = go-node go-kueue fake-gpu-plugin $(TOOL_TARGETS)
go-parts: $(GO_PARTS)
go-node: deps
	bash deploy/local-cluster/build.sh node >/dev/null
go-kueue: deps
	bash deploy/local-cluster/build-kueue.sh >/dev/null

# The C++ build and every Go part side by side: on a cold machine the Go parts spend minutes
# downloading modules and linking on one core, which the others fill; built one after the other,
# the last of them ran on alone for minutes after the C++ build. Then ctest, and each test's wall
# time (tests/test_times.py: the slowest, every e2e case).
test: deps
	$(MAKE) --no-print-directory -j$(words build $(GO_PARTS)) build $(GO_PARTS)
	cd $(BUILD_DIR) && { ctest -j$(TEST_JOBS) --output-on-failure --timeout 900 --output-junit ctest-results.xml; \
	  status=$$?; python3 $(CURDIR)/tests/test_times.py ctest-results.xml 10 || true; exit $$status; }

# kind for real (tests/kind/flows.sh; README "kind with GPUs"): a kind cluster of each kind with
# its example, on a node image built here when kindest/node cannot be pulled. Root; not in `make
# test` (its time). FLOWS=cpu or FLOWS=fake-gpu runs one.
FLOWS ?= cpu fake-gpu
test-kind: images
	bash tests/kind/flows.sh $(BUILD_DIR)/images $(FLOWS)

# The demo needs cifar-train alone: only its packages, only its target (the same build directory,
# so `make test` afterwards reuses what it compiled).
demo:
	bash scripts/install-deps.sh demo
	$(CMAKE_CONFIGURE) -DCIFAR_BUILD_OPERATOR=OFF -DCIFAR_BUILD_TESTS=OFF -DCIFAR_BUILD_BENCH=OFF
	cmake --build $(BUILD_DIR) -j $(JOBS) --target cifar-train
	bash scripts/demo.sh $(BUILD_DIR)/bin/cifar-train

bench: build
	bash bench/run_all.sh $(BUILD_DIR)

format:
	git ls-files '*.cpp' '*.h' | xargs clang-format -i

# clang-tidy cannot read GCC's precompiled headers, and it checks files, not unity batches: it gets
# a compile database without either.
tidy: deps
	cmake -S . -B build-tidy -G Ninja -DCMAKE_DISABLE_PRECOMPILE_HEADERS=ON -DCIFAR_UNITY_BUILD=OFF >/dev/null
	cmake --build build-tidy --target cifar_proto_generate >/dev/null
	git ls-files 'runtime/*.cpp' 'operator/*.cpp' 'tests/*.cpp' 'bench/*.cpp' | \
	  xargs -P $(JOBS) -n 1 clang-tidy -p build-tidy --quiet
	clang-tidy -p "$$(dirname "$$(bash deploy/local-cluster/build-fake-gpu-plugin.sh)")/build" --quiet \
	  deploy/local-cluster/fake-gpu-plugin/*.cpp

# The Helm chart's copies of the CRD, the alert rules and the dashboard (its files/), written from
# deploy/, their one source; ctest Helm.CopiesInSync runs it with --check.
chart-files:
	bash deploy/helm/sync-chart-files.sh

clean:
	rm -rf $(BUILD_DIR)
