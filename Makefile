# Entry points of the project. `make demo` and `make test` set up what they need on
# a fresh Debian machine: packages, a Docker engine, pinned tools built into bin/
# from the Go module proxy (cached by version), a kind node image built offline.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

ROOT := $(abspath .)
BIN := $(ROOT)/bin
BUILD := $(ROOT)/build

# Pinned tool versions. Kubernetes and etcd are pinned by hack/tools/k8s/go.mod.
KIND_VERSION := v0.32.0
HELM_VERSION := v3.22.0
KWOK_VERSION := v0.8.0
CONTROLLER_GEN_VERSION := v0.20.1
COREDNS_VERSION := v1.13.1
K8S_VERSION := $(shell awk '$$1 == "k8s.io/kubernetes" {print $$2}' hack/tools/k8s/go.mod)
ETCD_VERSION := $(shell awk '$$1 == "go.etcd.io/etcd/server/v3" {print $$2}' hack/tools/k8s/go.mod)
PROMETHEUS_OPERATOR_VERSION := $(shell awk '$$1 == "github.com/prometheus-operator/prometheus-operator" {print $$2}' hack/tools/prometheus-operator/go.mod)
RDMA_DP_VERSION := $(shell awk '$$1 == "require" && $$2 == "github.com/Mellanox/k8s-rdma-shared-dev-plugin" {print $$3}' hack/tools/rdma-shared-dp/go.mod)
FLANNEL_VERSION := $(shell awk '$$1 == "github.com/flannel-io/flannel" {print $$2}' hack/tools/flannel/go.mod)
CONTAINERD_VERSION := $(shell awk '$$1 == "github.com/containerd/containerd/v2" {print $$2}' hack/tools/containerd/go.mod)
CNI_PLUGINS_VERSION := $(shell awk '$$1 == "github.com/containernetworking/plugins" {print $$2}' hack/tools/cni-plugins/go.mod)
WHEREABOUTS_VERSION := $(shell awk '$$1 == "github.com/k8snetworkplumbingwg/whereabouts" {print $$2}' hack/tools/whereabouts/go.mod)
# Prometheus v3.M.P is Go module version v0.3MM.P.
PROMETHEUS_MODULE_VERSION := $(shell awk '$$1 == "github.com/prometheus/prometheus" {print $$2}' hack/tools/prometheus/go.mod)
PROMETHEUS_VERSION := $(shell echo $(PROMETHEUS_MODULE_VERSION) | awk -F. '{printf "%d.%d.%s", int($$2 / 100), $$2 % 100, $$3}')
$(if $(and $(FLANNEL_VERSION),$(CONTAINERD_VERSION),$(CNI_PLUGINS_VERSION),$(WHEREABOUTS_VERSION),$(PROMETHEUS_MODULE_VERSION),$(PROMETHEUS_OPERATOR_VERSION),$(RDMA_DP_VERSION)),,$(error hack/tools/{flannel,containerd,cni-plugins,whereabouts,prometheus,prometheus-operator,rdma-shared-dp}/go.mod name no version of their tool))

# The Kubernetes build is keyed by its versions and by a hash of its recipe.
K8S_INPUTS := hack/tools/k8s/build.sh hack/tools/k8s/go.mod hack/tools/k8s/go.sum hack/tools/k8s/etcd/main.go
K8S_KEY := $(shell cat $(K8S_INPUTS) | sha256sum | cut -c1-8)
K8S_BIN := $(BIN)/k8s-$(K8S_VERSION)-etcd-$(ETCD_VERSION)-$(K8S_KEY)
KIND := $(BIN)/kind-$(KIND_VERSION)/kind
HELM := $(BIN)/helm-$(HELM_VERSION)/helm
KWOK := $(BIN)/kwok-$(KWOK_VERSION)/kwok
CONTROLLER_GEN := $(BIN)/controller-gen-$(CONTROLLER_GEN_VERSION)/controller-gen
COREDNS := $(BIN)/coredns-$(COREDNS_VERSION)/coredns
RUNC_WRAPPER := $(BIN)/runc-wrapper
# containerd 2 for the offline kind node image (Debian's 1.6 does no CDI,
# which DRA drivers hand devices to containers through): containerd, its
# runc shim and ctr.
CONTAINERD := $(BIN)/containerd-$(CONTAINERD_VERSION)
# The Prometheus Operator, its config reloader and its CRDs; the Prometheus server.
PROMETHEUS_OPERATOR := $(BIN)/prometheus-operator-$(PROMETHEUS_OPERATOR_VERSION)
PROMETHEUS := $(BIN)/prometheus-$(PROMETHEUS_VERSION)/prometheus
# flanneld, the kind cluster's pod network.
FLANNEL := $(BIN)/flannel-$(FLANNEL_VERSION)/flanneld
# The kind cluster's data network: the macvlan CNI plugin and whereabouts
# (cluster-wide IPAM) with its CRDs.
MACVLAN := $(BIN)/cni-plugins-$(CNI_PLUGINS_VERSION)/macvlan
WHEREABOUTS := $(BIN)/whereabouts-$(WHEREABOUTS_VERSION)
# The RDMA shared device plugin (k8s-rdma-shared-dp, for make test-verbs)
# and checkconfig, its own config parser and validator (make test-chart).
RDMA_DP := $(BIN)/rdma-shared-dp-$(RDMA_DP_VERSION)
KUBECTL := $(K8S_BIN)/kubectl

# Images. The node image tag carries a hash of everything that goes into it.
VERSION := 0.1.0-dev
BASE_IMAGE := eventbuilder/debian-base:bookworm-$(shell sha256sum images/base/build.sh | cut -c1-8)
OPERATOR_IMAGE := eventbuilder/operator:$(VERSION)
BUILDER_IMAGE := eventbuilder/builder:$(VERSION)
READOUT_PLUGIN_IMAGE := eventbuilder/readout-device-plugin:$(VERSION)
DRA_DRIVER_IMAGE := eventbuilder/dra-driver:$(VERSION)
NODE_INPUTS := e2e/cluster/build-node-image.sh hack/runc-wrapper/main.go $(shell find e2e/cluster/node e2e/cluster/images -type f | LC_ALL=C sort)
NODE_HASH := $(shell (echo $(K8S_BIN) $(BASE_IMAGE) $(COREDNS_VERSION) $(KIND_VERSION) $(CONTAINERD_VERSION) $$(go env GOVERSION); cat $(NODE_INPUTS)) | sha256sum | cut -c1-12)
OFFLINE_NODE_IMAGE := eventbuilder/kind-node:$(K8S_VERSION)-$(NODE_HASH)
NODE_IMAGE_FILE := $(BUILD)/node-image
# The kind cluster's add-ons: its pod network and its monitoring stack.
# The pod network image: flanneld; netpol (e2e/cluster/netpol), which
# enforces NetworkPolicy ingress rules (flannel enforces none); and the data
# network: npwg-emulation (e2e/cluster/npwg, the NPWG multi-network
# annotations, as Multus), macvlan and whereabouts. Tagged by flannel's
# version and a hash of the rest.
PODNET_HASH := $(shell (echo $(CNI_PLUGINS_VERSION) $(WHEREABOUTS_VERSION); cat e2e/cluster/netpol/*.go e2e/cluster/npwg/*.go e2e/cluster/podnet.Dockerfile \
  operator/internal/testenv/npwg/network-attachment-definitions.yaml) | sha256sum | cut -c1-8)
PODNET_IMAGE := eventbuilder/podnet:flannel-$(FLANNEL_VERSION)-$(PODNET_HASH)
PROMETHEUS_OPERATOR_IMAGE := eventbuilder/prometheus-operator:$(PROMETHEUS_OPERATOR_VERSION)
PROMETHEUS_CONFIG_RELOADER_IMAGE := eventbuilder/prometheus-config-reloader:$(PROMETHEUS_OPERATOR_VERSION)
PROMETHEUS_IMAGE := eventbuilder/prometheus:$(PROMETHEUS_VERSION)

DEMO_CLUSTER := eventbuilder-demo
PACKAGES := build-essential ccache cmake ninja-build libgtest-dev debootstrap clang libclang-rt-14-dev iperf3 busybox-static nlohmann-json3-dev prometheus \
  libibverbs-dev libmicrohttpd-dev libssl-dev zlib1g-dev libsimgrid-dev libcli11-dev python3-matplotlib chromium

export PATH := $(K8S_BIN):$(PATH)
# ccache (builder/CMakeLists.txt): paths under the clone hashed as relative,
# so that a clone in another folder (CI's) reads what this one compiled.
export CCACHE_BASEDIR ?= $(CURDIR)
export CCACHE_NOHASHDIR ?= 1

.PHONY: help
help: ## Show the targets.
	@awk 'BEGIN {FS = ":.*## "} /^[a-z0-9-]+:.*## / {printf "  %-16s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

##@ Entry points

.PHONY: test
# Under make test a test that cannot run here (a tool, binary, device or
# privilege missing) fails, naming what is missing, instead of skipping.
test: export EB_REQUIRE_ALL_TESTS := 1
test: lint test-builder test-bench-bundle test-sanitizers test-verbs test-operator test-farm test-chart test-e2e ## Everything: lint, C++ and Go tests (also under sanitizers and over RDMA verbs), envtest, the farm smoke on KWOK, chart checks, the kind e2e suite; no test may skip for want of a tool.

.PHONY: demo
demo: images cluster-images node-image build-operator $(KIND) $(HELM) ## Bring up a kind cluster with Prometheus, install the chart, run a sample, print rates and kubectl eventbuilder status; leaves it up.
	e2e/demo.sh $(DEMO_CLUSTER) $$(cat $(NODE_IMAGE_FILE)) $(KIND) $(HELM) $(OPERATOR_IMAGE) $(BUILDER_IMAGE) $(PODNET_IMAGE) \
	  $(PROMETHEUS_OPERATOR) $(PROMETHEUS_OPERATOR_IMAGE) $(PROMETHEUS_CONFIG_RELOADER_IMAGE) $(PROMETHEUS_IMAGE) $(PROMETHEUS_VERSION)

##@ Tests

.PHONY: test-builder
test-builder: build-builder ## C++ unit and multi-process tests, and a bounded fuzzing run of each parser.
	@echo ">> $@"
	ctest --test-dir $(BUILD)/builder --output-on-failure -LE verbs
	builder/fuzz/run.sh $(BUILD)/builder-fuzz

.PHONY: test-bench-bundle
test-bench-bundle: build-builder ## The bench bundle (make bench-bundle) runs a short bench in a root holding only busybox and the bundle.
	@echo ">> $@"
	builder/bench/bundle.sh $(BUILD)/builder $(BUILD)/bench-bundle-check
	builder/bench/bundle_check.sh $(BUILD)/bench-bundle-check

.PHONY: test-sanitizers
test-sanitizers: packages ## The C++ suites built with ASan+UBSan (all, multi-process included) and TSan (in-process ones).
	@echo ">> $@"
	builder/tests/sanitize.sh $(BUILD)

# The verbs suites need an RDMA device: a real HCA where there is one, else
# Soft-RoCE (rdma_rxe) in a VM booted from Debian's kernel (hack/verbs-vm).
VERBS_TIMEOUT ?= 900

.PHONY: test-verbs
test-verbs: build-builder $(HELM) $(RDMA_DP)/k8s-rdma-shared-dp ## The builder's multi-process suites over libibverbs RC, and the RDMA shared device plugin registering the chart's resources (real HCA, else Soft-RoCE in a VM).
	@echo ">> $@"
	cd hack/tools/rdma-shared-dp && CGO_ENABLED=0 go build -trimpath -o $(BUILD)/kubelet-registrar ./kubelet-registrar
	hack/verbs-vm/run.sh --timeout $(VERBS_TIMEOUT) -- bash -c 'ctest --test-dir $(BUILD)/builder -L verbs --output-on-failure --no-tests=error && \
	  hack/verbs-vm/rdma-device-plugin.sh $(HELM) $(RDMA_DP)/k8s-rdma-shared-dp $(BUILD)/kubelet-registrar'

.PHONY: qualify-rdma
qualify-rdma: build-builder ## A report a site keeps of its RDMA device under the builder (device, firmware, MTU, GID, perftest and the builder at the MFP size, injected queue-pair faults, counters before and after) in build/qualify-rdma; a real HCA, else Soft-RoCE in a VM.
	hack/verbs-vm/qualify.sh $(BUILD)/builder $(BUILD)/qualify-rdma --timeout $(VERBS_TIMEOUT)

.PHONY: verbs-selftest
verbs-selftest: ## Check the verbs runner itself (device ACTIVE, ib_write_bw, 4 processes).
	hack/verbs-vm/selftest.sh

.PHONY: test-operator
# -timeout 20m: go test's default 10 minutes per package is too close on a
# slow 2-core machine; a hang still fails.
test-operator: packages build-builder $(K8S_BIN)/etcd $(HELM) ## Go tests under -race: envtest against a real API server, the control-API contract suite against the emulation and real eb-builder processes.
	@echo ">> $@"
	cd operator && KUBEBUILDER_ASSETS=$(K8S_BIN) EB_BUILDER=$(abspath $(BUILD)/builder/eb-builder) go test -race -timeout 20m ./...
	cd hack/runc-wrapper && go test ./...

.PHONY: lint
lint: $(CONTROLLER_GEN) $(HELM) ## gofmt and go vet over the Go modules, the CRDs, RBAC and deepcopy code equal to what the API types generate, helm lint.
	hack/lint.sh $(CONTROLLER_GEN) $(HELM)

.PHONY: test-chart
test-chart: packages $(HELM) build-operator $(RDMA_DP)/checkconfig ## Lint and render the Helm chart (monitoring objects, the device plugins and the data network on too; the rendered readout-card and RDMA configurations checked by the plugins' own parsers, bad values refused naming the field); check and unit-test its alerts with promtool.
	@echo ">> $@"
	$(HELM) lint --strict charts/eventbuilder-operator
	$(HELM) template eb charts/eventbuilder-operator >/dev/null
	$(HELM) lint --strict charts/eventbuilder-operator --set draDriver.enabled=true
	$(HELM) template eb charts/eventbuilder-operator --set monitoring.podMonitor.enabled=true \
	  --set monitoring.serviceMonitor.enabled=true --set monitoring.prometheusRule.enabled=true \
	  --set monitoring.dashboard.enabled=true >/dev/null
	hack/check-readout-chart.sh $(HELM) $(BUILD)/operator/readout-device-plugin
	hack/check-network-chart.sh $(HELM) $(RDMA_DP)/checkconfig
	promtool check rules charts/eventbuilder-operator/files/alerts.yaml
	promtool test rules charts/tests/alerts_test.yaml

.PHONY: test-e2e
# What the kind suites (e2e/main_test.go) are handed: tools and images.
E2E_ENV = E2E_NODE_IMAGE=$$(cat $(NODE_IMAGE_FILE)) E2E_KIND=$(KIND) E2E_HELM=$(HELM) E2E_KUBECTL=$(KUBECTL) E2E_PODNET_IMAGE=$(PODNET_IMAGE) \
	  E2E_PLUGIN=$(BUILD)/operator/kubectl-eventbuilder E2E_ARTIFACTS=$(BUILD)/e2e \
	  E2E_OPERATOR_IMAGE=$(OPERATOR_IMAGE) E2E_BUILDER_IMAGE=$(BUILDER_IMAGE) E2E_READOUT_PLUGIN_IMAGE=$(READOUT_PLUGIN_IMAGE) E2E_DRA_DRIVER_IMAGE=$(DRA_DRIVER_IMAGE) \
	  E2E_PROMETHEUS_OPERATOR_DIR=$(PROMETHEUS_OPERATOR) E2E_PROMETHEUS_OPERATOR_IMAGE=$(PROMETHEUS_OPERATOR_IMAGE) \
	  E2E_PROMETHEUS_CONFIG_RELOADER_IMAGE=$(PROMETHEUS_CONFIG_RELOADER_IMAGE) \
	  E2E_PROMETHEUS_IMAGE=$(PROMETHEUS_IMAGE) E2E_PROMETHEUS_VERSION=$(PROMETHEUS_VERSION)

test-e2e: images cluster-images node-image build-plugin $(KIND) $(HELM) ## The kind end-to-end suite (creates and deletes its own cluster); the console's screenshots go to build/e2e.
	@echo ">> $@"
	cd e2e && $(E2E_ENV) go test -count=1 -timeout 30m -v -p 1 ./...

SOAK_MINUTES ?= 60
SOAK_SEED ?=
.PHONY: soak
soak: images cluster-images node-image build-plugin $(KIND) $(HELM) ## Outside make test: SOAK_MINUTES (default 60) of seeded random faults (SOAK_SEED, default the clock) on kind under a production run and a run without a Fabric; prints the report, written to build/e2e/soak/ with the samples.
	cd e2e && $(E2E_ENV) SOAK_MINUTES=$(SOAK_MINUTES) SOAK_SEED=$(SOAK_SEED) \
	  go test -tags soak -count=1 -timeout $$(( $(SOAK_MINUTES) + 45 ))m -v -p 1 -run '^TestSoak$$' .

.PHONY: test-stress
test-stress: packages build-builder $(K8S_BIN)/etcd ## Outside make test (about 15 min on 2 cores): the operator's packages (-race, -count=5, shuffled) and the builder's multi-process suites (--gtest_repeat=5, shuffled) under a CPU hog on every core; prints each failure with its seed. STRESS_COUNT, STRESS_CPU_LOAD.
	@hack/ensure-packages.sh stress-ng
	hack/test-stress.sh $(BUILD)/builder $(K8S_BIN) $(abspath $(BUILD)/builder/eb-builder)

##@ Benchmarks

.PHONY: bench
bench: build-builder ## Data-mover benchmark: builder vs iperf3 on loopback, units x data threads, barrier latency vs N (BENCH lines).
	builder/bench/run.sh $(BUILD)/builder

BUNDLE ?= $(BUILD)/bench-bundle
.PHONY: bench-bundle
bench-bundle: build-builder ## Pack make bench into BUNDLE (build/bench-bundle): BUNDLE/run runs it on any bare x86-64 Linux machine.
	builder/bench/bundle.sh $(BUILD)/builder $(BUNDLE)

.PHONY: bench-verbs
bench-verbs: build-builder ## ib_write_bw, then the builder over verbs and over TCP on one verbs device (BENCH lines).
	hack/verbs-vm/run.sh --timeout $(VERBS_TIMEOUT) -- builder/bench/verbs.sh $(BUILD)/builder

.PHONY: test-farm
test-farm: packages $(K8S_BIN)/etcd $(KWOK) $(HELM) ## make bench-farm's smoke: 20 KWOK servers, every scenario, every target checked (about 1 min).
	@echo ">> $@"
	KUBEBUILDER_ASSETS=$(K8S_BIN) KWOK=$(KWOK) HELM=$(HELM) operator/hack/farm.sh -servers 20 -steady 10s -check

.PHONY: bench-farm
bench-farm: packages $(K8S_BIN)/etcd $(KWOK) $(HELM) ## The operator as the chart deploys it on a farm's control plane: kube-scheduler, kube-controller-manager, 167 KWOK servers, 334 pods; apply, losses, drain, steady state (BENCH lines, about 3 min). FARM_FLAGS.
	KUBEBUILDER_ASSETS=$(K8S_BIN) KWOK=$(KWOK) HELM=$(HELM) operator/hack/farm.sh $(FARM_FLAGS)

.PHONY: sim
sim: build-builder ## The farm simulated with SimGrid on the calibrated model: event rate and Tb/s against servers (16-500) by barrier, and against --barrier-every and --receive-window at 163 servers; CSV and PNG in builder/sim/results (about 16 min on 2 cores).
	cd operator && go build -o $(abspath $(BUILD))/eb-plan ./cmd/eb-plan && go build -o $(abspath $(BUILD))/fabricgen ./hack/fabricgen
	builder/sim/run.sh $(BUILD)/builder/sim/eb-farm-sim $(BUILD)/eb-plan $(BUILD)/fabricgen builder/sim/results

.PHONY: sim-calibrate
sim-calibrate: build-builder ## Fit eb-farm-sim's host costs to the builder measured on 16 cores (builder/sim/results/calibration.csv; about 2 min).
	builder/sim/calibrate.py $(BUILD)/builder/sim/eb-farm-sim builder/sim/results

.PHONY: bench-operator
bench-operator: packages $(K8S_BIN)/etcd ## Operator scale benchmark against a real API server (BENCH lines).
	KUBEBUILDER_ASSETS=$(K8S_BIN) operator/hack/bench.sh

##@ Build

.PHONY: build-builder
build-builder: packages ## Build the C++ builder (Release).
	cmake -S builder -B $(BUILD)/builder -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build $(BUILD)/builder

.PHONY: build-operator
build-operator: build-plugin ## Build the operator binary, the readout device plugin and the DRA driver.
	cd operator && CGO_ENABLED=0 go build -trimpath -o $(BUILD)/operator/manager ./cmd
	cd operator && CGO_ENABLED=0 go build -trimpath -o $(BUILD)/operator/readout-device-plugin ./cmd/readout-device-plugin
	cd operator && CGO_ENABLED=0 go build -trimpath -o $(BUILD)/operator/eventbuilder-dra ./cmd/eventbuilder-dra

.PHONY: build-plugin
build-plugin: ## Build the kubectl plugin (kubectl eventbuilder).
	cd operator && CGO_ENABLED=0 go build -trimpath -o $(BUILD)/operator/kubectl-eventbuilder ./cmd/kubectl-eventbuilder

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Regenerate CRDs, RBAC and deepcopy code from the API types.
	CONTROLLER_GEN=$(CONTROLLER_GEN) operator/hack/generate.sh

.PHONY: images
images: docker base-image build-builder build-operator ## Build the operator, builder, readout device plugin and DRA driver images (no registry needed).
	mkdir -p $(BUILD)/operator-image-context && cp $(BUILD)/operator/manager $(BUILD)/operator-image-context/
	docker build -q -t $(OPERATOR_IMAGE) -f images/operator/Dockerfile $(BUILD)/operator-image-context >/dev/null
	mkdir -p $(BUILD)/readout-plugin-image-context && cp $(BUILD)/operator/readout-device-plugin $(BUILD)/readout-plugin-image-context/
	docker build -q -t $(READOUT_PLUGIN_IMAGE) -f images/readout-device-plugin/Dockerfile $(BUILD)/readout-plugin-image-context >/dev/null
	mkdir -p $(BUILD)/dra-driver-image-context && cp $(BUILD)/operator/eventbuilder-dra $(BUILD)/dra-driver-image-context/
	docker build -q -t $(DRA_DRIVER_IMAGE) -f images/dra-driver/Dockerfile $(BUILD)/dra-driver-image-context >/dev/null
	mkdir -p $(BUILD)/builder-image-context && cp $(BUILD)/builder/eb-builder $(BUILD)/builder/eb-readout-emulator $(BUILD)/builder/eb-consumer $(BUILD)/builder-image-context/
	docker build -q -t $(BUILDER_IMAGE) --build-arg BASE_IMAGE=$(BASE_IMAGE) -f images/builder/Dockerfile $(BUILD)/builder-image-context >/dev/null
	@echo ">> images $(OPERATOR_IMAGE) $(BUILDER_IMAGE) $(READOUT_PLUGIN_IMAGE) $(DRA_DRIVER_IMAGE)"

.PHONY: cluster-images
cluster-images: docker base-image $(FLANNEL) $(MACVLAN) $(WHEREABOUTS)/whereabouts $(PROMETHEUS_OPERATOR)/operator $(PROMETHEUS) ## Build the kind cluster's add-on images: the pod and data networks (flannel, netpol, npwg-emulation, macvlan, whereabouts), the Prometheus Operator, its config reloader, Prometheus.
	rm -rf $(BUILD)/addon-images && mkdir -p $(BUILD)/addon-images/{podnet/cni,podnet/crds,prometheus-operator,config-reloader,prometheus}
	cp $(FLANNEL) $(BUILD)/addon-images/podnet/
	cd e2e && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o $(BUILD)/addon-images/podnet/netpol ./cluster/netpol
	cd e2e && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o $(BUILD)/addon-images/podnet/cni/npwg-emulation ./cluster/npwg
	cp $(MACVLAN) $(WHEREABOUTS)/whereabouts $(BUILD)/addon-images/podnet/cni/
	cp $(WHEREABOUTS)/crds/*.yaml operator/internal/testenv/npwg/network-attachment-definitions.yaml $(BUILD)/addon-images/podnet/crds/
	cp $(PROMETHEUS_OPERATOR)/operator $(BUILD)/addon-images/prometheus-operator/
	cp $(PROMETHEUS_OPERATOR)/prometheus-config-reloader $(BUILD)/addon-images/config-reloader/
	cp $(PROMETHEUS) $(BUILD)/addon-images/prometheus/
	docker build -q -t $(PODNET_IMAGE) --build-arg BASE_IMAGE=$(BASE_IMAGE) -f e2e/cluster/podnet.Dockerfile $(BUILD)/addon-images/podnet >/dev/null
	docker build -q -t $(PROMETHEUS_OPERATOR_IMAGE) --build-arg BASE_IMAGE=$(BASE_IMAGE) --build-arg BINARY=operator \
	  -f e2e/monitoring/images/go-binary.Dockerfile $(BUILD)/addon-images/prometheus-operator >/dev/null
	docker build -q -t $(PROMETHEUS_CONFIG_RELOADER_IMAGE) --build-arg BASE_IMAGE=$(BASE_IMAGE) --build-arg BINARY=prometheus-config-reloader \
	  -f e2e/monitoring/images/go-binary.Dockerfile $(BUILD)/addon-images/config-reloader >/dev/null
	docker build -q -t $(PROMETHEUS_IMAGE) --build-arg BASE_IMAGE=$(BASE_IMAGE) \
	  -f e2e/monitoring/images/prometheus.Dockerfile $(BUILD)/addon-images/prometheus >/dev/null
	@echo ">> images $(PODNET_IMAGE) $(PROMETHEUS_OPERATOR_IMAGE) $(PROMETHEUS_CONFIG_RELOADER_IMAGE) $(PROMETHEUS_IMAGE)"

##@ Machine setup (each step is skipped when already done)

.PHONY: packages
packages:
	@hack/ensure-packages.sh $(PACKAGES)

.PHONY: docker
docker: packages $(RUNC_WRAPPER)
	@hack/ensure-docker.sh $(RUNC_WRAPPER)

.PHONY: base-image
base-image: docker
	@images/base/build.sh $(BASE_IMAGE)

.PHONY: node-image
node-image: packages base-image $(K8S_BIN)/etcd $(COREDNS) $(KIND) $(RUNC_WRAPPER) $(CONTAINERD)/containerd ## Choose the kind node image: kind's own when pullable, else built offline (cached by content hash).
	@mkdir -p $(BUILD)
	@e2e/cluster/node-image.sh $(OFFLINE_NODE_IMAGE) sigs.k8s.io/kind@$(KIND_VERSION) \
	  $(BASE_IMAGE) $(K8S_BIN) $(COREDNS) $(RUNC_WRAPPER) $(CONTAINERD) > $(NODE_IMAGE_FILE).tmp
	@mv $(NODE_IMAGE_FILE).tmp $(NODE_IMAGE_FILE)
	@echo ">> node image $$(cat $(NODE_IMAGE_FILE))"

.PHONY: tools
tools: $(K8S_BIN)/etcd $(KIND) $(HELM) $(KWOK) $(CONTROLLER_GEN) $(COREDNS) $(CONTAINERD)/containerd $(FLANNEL) $(MACVLAN) $(WHEREABOUTS)/whereabouts $(RDMA_DP)/checkconfig $(PROMETHEUS_OPERATOR)/operator $(PROMETHEUS) ## Build every pinned tool into bin/.

# Expensive tools are cached by the version in their path, never by source mtimes
# (a fresh clone has new mtimes). Each is built into a temporary folder that is
# renamed when complete, so an interrupted build never leaves a binary that looks
# finished. etcd is the last binary build.sh writes.
$(K8S_BIN)/etcd:
	@echo ">> building Kubernetes $(K8S_VERSION) and etcd $(ETCD_VERSION) (about 6 min cold on 2 cores)"
	rm -rf $(K8S_BIN).tmp && hack/tools/k8s/build.sh $(K8S_BIN).tmp && mv $(K8S_BIN).tmp $(K8S_BIN)

$(KIND):
	rm -rf $(@D).tmp && GOBIN=$(@D).tmp CGO_ENABLED=0 go install sigs.k8s.io/kind@$(KIND_VERSION) && rm -rf $(@D) && mv $(@D).tmp $(@D)

$(KWOK):
	rm -rf $(@D).tmp && GOBIN=$(@D).tmp CGO_ENABLED=0 go install sigs.k8s.io/kwok/cmd/kwok@$(KWOK_VERSION) && rm -rf $(@D) && mv $(@D).tmp $(@D)

$(HELM):
	@echo ">> building helm $(HELM_VERSION) (about 3 min cold)"
	rm -rf $(@D).tmp && GOBIN=$(@D).tmp CGO_ENABLED=0 go install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION) && rm -rf $(@D) && mv $(@D).tmp $(@D)

$(CONTROLLER_GEN):
	rm -rf $(@D).tmp && GOBIN=$(@D).tmp go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION) && rm -rf $(@D) && mv $(@D).tmp $(@D)

$(COREDNS):
	rm -rf $(@D).tmp && GOBIN=$(@D).tmp CGO_ENABLED=0 go install github.com/coredns/coredns@$(COREDNS_VERSION) && rm -rf $(@D) && mv $(@D).tmp $(@D)

# The CRDs come from the same module as the binaries.
$(PROMETHEUS_OPERATOR)/operator:
	@echo ">> building the Prometheus Operator $(PROMETHEUS_OPERATOR_VERSION) (about 4 min cold)"
	rm -rf $(@D).tmp && cd hack/tools/prometheus-operator && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o $(@D).tmp/ \
	  github.com/prometheus-operator/prometheus-operator/cmd/prometheus-config-reloader \
	  github.com/prometheus-operator/prometheus-operator/cmd/operator
	mkdir -p $(@D).tmp/crds && install -m 0644 \
	  "$$(cd hack/tools/prometheus-operator && go list -m -f '{{.Dir}}' github.com/prometheus-operator/prometheus-operator)"/example/prometheus-operator-crd/*.yaml $(@D).tmp/crds/
	rm -rf $(@D) && mv $(@D).tmp $(@D)

# flanneld's UDP backend is cgo; the image's Debian has the same C library as this host.
$(FLANNEL): | packages
	@echo ">> building flannel $(FLANNEL_VERSION) (about 3 min cold)"
	rm -rf $(@D).tmp && mkdir -p $(@D).tmp && cd hack/tools/flannel && CGO_ENABLED=1 go build -trimpath -ldflags="-s -w" \
	  -o $(@D).tmp/flanneld github.com/flannel-io/flannel
	rm -rf $(@D) && mv $(@D).tmp $(@D)

# Static (no cgo): without the btrfs, devmapper and ZFS snapshotters, which a
# kind node's overlayfs does not need.
$(CONTAINERD)/containerd:
	@echo ">> building containerd $(CONTAINERD_VERSION) (about 1 min cold)"
	rm -rf $(@D).tmp && mkdir -p $(@D).tmp && cd hack/tools/containerd && CGO_ENABLED=0 go build -trimpath -tags "no_btrfs no_devmapper no_zfs" \
	  -ldflags="-s -w -X github.com/containerd/containerd/v2/version.Version=$(CONTAINERD_VERSION)" -o $(@D).tmp/ \
	  github.com/containerd/containerd/v2/cmd/containerd github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 \
	  github.com/containerd/containerd/v2/cmd/ctr
	rm -rf $(@D) && mv $(@D).tmp $(@D)

$(MACVLAN):
	@echo ">> building the macvlan CNI plugin $(CNI_PLUGINS_VERSION)"
	rm -rf $(@D).tmp && mkdir -p $(@D).tmp && cd hack/tools/cni-plugins && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" \
	  -o $(@D).tmp/macvlan github.com/containernetworking/plugins/plugins/main/macvlan
	rm -rf $(@D) && mv $(@D).tmp $(@D)

# The IPAM plugin and the CRDs of its pools and reservations (not the node
# slice controller's: whereabouts' node slices are not used).
$(WHEREABOUTS)/whereabouts:
	@echo ">> building whereabouts $(WHEREABOUTS_VERSION) (about 1 min cold)"
	rm -rf $(@D).tmp && mkdir -p $(@D).tmp/crds && cd hack/tools/whereabouts && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" \
	  -o $(@D).tmp/whereabouts github.com/k8snetworkplumbingwg/whereabouts/cmd
	src="$$(cd hack/tools/whereabouts && go list -m -f '{{.Dir}}' github.com/k8snetworkplumbingwg/whereabouts)"/doc/crds && \
	  install -m 0644 $$src/whereabouts.cni.cncf.io_ippools.yaml $$src/whereabouts.cni.cncf.io_overlappingrangeipreservations.yaml $(@D).tmp/crds/
	rm -rf $(@D) && mv $(@D).tmp $(@D)

$(RDMA_DP)/checkconfig $(RDMA_DP)/k8s-rdma-shared-dp &:
	@echo ">> building the RDMA shared device plugin and its config check, $(RDMA_DP_VERSION) (about 1 min cold)"
	rm -rf $(@D).tmp && mkdir -p $(@D).tmp && cd hack/tools/rdma-shared-dp && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" \
	  -o $(@D).tmp/ ./checkconfig github.com/Mellanox/k8s-rdma-shared-dev-plugin/cmd/k8s-rdma-shared-dp
	rm -rf $(@D) && mv $(@D).tmp $(@D)

# Debian's Prometheus has no Kubernetes service discovery: this one has only that.
$(PROMETHEUS):
	@echo ">> building Prometheus $(PROMETHEUS_VERSION) (about 4 min cold)"
	rm -rf $(@D).tmp && cd hack/tools/prometheus && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" \
	  -tags remove_all_sd,enable_kubernetes_sd -o $(@D).tmp/ github.com/prometheus/prometheus/cmd/prometheus
	rm -rf $(@D) && mv $(@D).tmp $(@D)

$(RUNC_WRAPPER): hack/runc-wrapper/main.go
	cd hack/runc-wrapper && CGO_ENABLED=0 go build -trimpath -o $@ .

.PHONY: clean
clean: ## Remove build outputs (keeps the tool cache in bin/).
	rm -rf $(BUILD)
