# bindkit's build entry points. `make test` is what CI runs (.ci/run).

GO      ?= go
BIN     := $(CURDIR)/bin
TOOLS   := hack/tools
BUILD_CONTROL_PLANE := hack/build-control-plane.sh

# Kubernetes minors the integration tests run against. The newest one's
# control plane is built by hack/tools into bin/, the older one's by
# hack/tools/k8s136 into bin/v1.36/ (testenv looks there when
# BINDKIT_KUBE_MINOR=1.36).
OLDER_MINOR := 1.36
OLDER_TOOLS := $(TOOLS)/k8s136
OLDER_BIN   := $(BIN)/v$(OLDER_MINOR)

# Each control plane is rebuilt only when its tools module (or the build
# script) changes. One build makes all four binaries; kube-apiserver stands
# for it, and the others are rebuilt only if they go missing.
NEWEST_INPUTS := $(TOOLS)/go.mod $(TOOLS)/go.sum $(TOOLS)/etcd/main.go $(BUILD_CONTROL_PLANE)
OLDER_INPUTS  := $(OLDER_TOOLS)/go.mod $(OLDER_TOOLS)/go.sum $(OLDER_TOOLS)/etcd/main.go $(BUILD_CONTROL_PLANE)

# kwok simulates nodes and pods for envtest's Workloads option. Its module
# (hack/tools/kwok) is its own, since kwok's Kubernetes libraries are of
# their own minor; one binary in bin/ serves every minor's apiserver.
KWOK_TOOLS := $(TOOLS)/kwok
KWOK       := $(BIN)/kwok

NEWEST_BINS   := $(BIN)/kube-apiserver $(BIN)/kube-controller-manager $(BIN)/kube-scheduler $(BIN)/etcd
OLDER_BINS    := $(OLDER_BIN)/kube-apiserver $(OLDER_BIN)/kube-controller-manager $(OLDER_BIN)/kube-scheduler $(OLDER_BIN)/etcd

export BINDKIT_BIN_DIR := $(BIN)

.PHONY: demo test tools vet unit controlplane

## demo: run the githubbinding walkthrough on a local control plane.
demo: $(NEWEST_BINS) $(KWOK)
	$(GO) run ./hack/demo

# The packages whose tests start a control plane (they import test/testenv,
# envtest or bindingtest) run against both minors, but for those listed in
# NEWEST_ONLY. What can differ between two minors is what the kube-apiserver
# and the built-in controllers do: admission (webhook calls, the
# MutatingAdmissionPolicy and its CEL), CRD validation and defaulting,
# server-side apply, the built-in kinds and the pods their controllers run.
# The suites below test bindkit's own machinery through APIs no minor
# changes (custom resources, Leases, Events, a Deployment's spec and
# status): its behaviour under faults, load and hostile peers
# (test/faults/..., test/hostile), rollouts and the operator's controls
# (test/rollout, test/operator), panic containment (test/fixturebinding),
# the README's demo (test/demo), the swap of the example controller of the
# release before and of this tree (test/upgrade: records and workloads,
# Deployments and a Lease), and the controller, tracker and injection
# packages. They run against the newest minor only and take most of a pass.
# So does cmd/bindkit, the author's command: what its scaffolded modules
# ask of a kube-apiserver (their CRD, webhook and admission policies, as
# bindkit generates them for every kind) is proven on the older minor by
# the examples, test/authority and test/declaredbinding; its own time goes
# to building a dozen modules (15 minutes of the older lane on 2026-11-29).
NEWEST_ONLY = test\/(faults|rollout|hostile|operator|fixturebinding|demo|upgrade)(\/.*)?|controller|tracker|injection|injection\/sharedmain|cmd\/bindkit
CONTROL_PLANE_PKGS = $(shell $(GO) list -f '{{.ImportPath}} {{join .TestImports " "}} {{join .XTestImports " "}}' ./... | awk '/ github.com\/bindkit\/bindkit\/(test\/testenv|envtest|bindingtest)( |$$)/ && $$1 !~ /^github.com\/bindkit\/bindkit\/($(NEWEST_ONLY))$$/ {print $$1}')

# Suites that mostly wait (for leases to expire, backoffs, rollout
# deadlines, certificate rotations, the example binary's restarts; a tenth
# to a half of a core each): they run in lanes of their own, three at a
# time (hack/test-lanes.sh), beside the main lane, so they do not hold its
# two slots while the CPU-heavy suites (cmd/bindkit's builds, test/hostile's
# floods) could use them. Longest first, so a lane does not end with one of
# them alone; the two that also run against the older minor (the
# sinkbinding example, test/e2e) right after the longest, so the older
# lane gets them early.
# test/operator and test/e2e (waves of pods to roll out) join them: the
# main lane was the longest (measured in CONTRIBUTING.md). So does
# test/upgrade (about 2 min 15 s: two controller drains of 15 s, lease
# handovers, rollouts of pods; a tenth of a core but for the 30 CPU s
# compile of the release before, at its start).
WAITING = ./test/faults/rollout ./examples/sinkbinding/... ./test/e2e ./test/faults/outage ./test/faults ./test/faults/backoff ./test/upgrade ./test/fixturebinding ./test/operator
WAITING_PKGS = $(shell $(GO) list $(WAITING))

# go test starts the packages it is given in their order (a package named
# twice runs once), two at a time on two cores; these take longest (one to
# five minutes each, longest first), so they start first and a pass does
# not end with one of them running alone. After the four longest, the
# packages that also run against the older minor: the older lane runs
# each once its newest pass starts (hack/test-exec.sh hands it the test
# binary), so they go early.
SLOW_FIRST = ./cmd/bindkit ./test/hostile ./test/rollout ./test/faults/admission ./test/lifecycle ./envtest ./config ./policy ./bindingtest ./psbinding ./webhook ./test/docs ./test/demo
MAIN_PKGS = $(filter-out $(WAITING_PKGS),$(shell $(GO) list $(SLOW_FIRST) ./...))

# The directories of the packages that run against the older minor too:
# CONTROL_PLANE_PKGS and the controller-runtime module's. The older lane
# runs the test binaries their newest pass linked (hack/test-exec.sh).
OLDER_DIRS = $(shell $(GO) list -f '{{.Dir}}' $(CONTROL_PLANE_PKGS)) \
	$(shell cd $(CR_MODULE) && $(GO) list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.Dir}}{{end}}' ./...)

# The module that runs Binding kinds inside a controller-runtime Manager
# (controllerruntime/) has a go.mod of its
# own, so controller-runtime never becomes a dependency of the framework;
# `go test ./...` here does not reach it. Its tests start control planes
# (one per package) and run against both minors.
CR_MODULE := controllerruntime

# The controller-runtime module's example is a kubebuilder project
# (kubebuilder init, then bindkit kubebuilder create binding), a module of
# its own: make test runs its own make test, as its users would, on the
# newest minor's binaries (hack/test-lanes.sh).
CR_EXAMPLE := $(CR_MODULE)/examples/githubbinding

# The operator's kubectl plugin (cmd/kubectl-bindkit) has a go.mod of its
# own too, so k8s.io/cli-runtime (kubectl's flags, with the kustomize and
# cobra it brings) never becomes a dependency of the framework; `go test
# ./...` here does not reach it. Its tests need no control plane: the
# plugin's control-plane tests (test/operator) build its binary and run
# it as operators do.
PLUGIN_MODULE := cmd/kubectl-bindkit

# A test binary's time limit. go test's default, 10 minutes, is less than
# the slowest control-plane package takes on 2 busy cores with -race
# (cmd/bindkit, which scaffolds, builds and tests a dozen modules and a
# kubebuilder project, took 28 minutes in the three lanes on 2026-11-29); a
# hung test still ends the run within CI's 90 minutes.
TEST_TIMEOUT ?= 45m

# How make test runs go test. -ldflags=-w leaves DWARF (what debuggers
# read) out of the test binaries: a quarter of each link's CPU, and a
# pass links about sixty; stack traces and -race reports do not use it.
# -vet=off: make test runs make vet first (every analyzer, test files
# included), so go test's own vet (a few of those analyzers) would redo
# it, in the race build's configuration and once per go test process:
# 230 CPU seconds on a fresh machine (CONTRIBUTING.md).
TEST_FLAGS = -race -count=1 -timeout $(TEST_TIMEOUT) -ldflags=-w -vet=off

## test: build the control planes if needed, vet, run every test with -race
## against the newest minor and the control-plane tests against the older,
## in three lanes at once (hack/test-lanes.sh).
# On a fresh machine each step reuses some of the Go build cache the one
# before it filled: kwok (after the older minor's control plane) much of
# k8s.io/api and apimachinery, vet (after both) the newest's client-go,
# k8s.io/api and apimachinery, built at the same versions with the same
# dependencies (envtest's TestModulesShareClientGoBuilds).
# Building the two minors side by side took as long as one after the
# other: both builds keep the two cores busy.
test: tools vet
	@GO='$(GO)' TEST_FLAGS='$(TEST_FLAGS)' OLDER_MINOR='$(OLDER_MINOR)' CR_MODULE='$(CR_MODULE)' CR_EXAMPLE='$(CR_EXAMPLE)' PLUGIN_MODULE='$(PLUGIN_MODULE)' BIN='$(BIN)' \
	MAIN_PKGS='$(MAIN_PKGS)' WAITING_PKGS='$(WAITING_PKGS)' \
	OLDER_DIRS='$(OLDER_DIRS)' \
	hack/test-lanes.sh

## tools: build kube-apiserver, kube-controller-manager, kube-scheduler and
## etcd of both minors, and kwok (first time: about 6 minutes for 1.37, 4.5
## for 1.36 and 2 for kwok on 2 cores).
tools: $(NEWEST_BINS) $(OLDER_BINS) $(KWOK)

$(KWOK): $(KWOK_TOOLS)/go.mod $(KWOK_TOOLS)/go.sum
	cd $(KWOK_TOOLS) && $(GO) build -ldflags "-s -w" -o $(KWOK) sigs.k8s.io/kwok/cmd/kwok

$(BIN)/kube-apiserver: $(NEWEST_INPUTS)
	$(BUILD_CONTROL_PLANE) $(TOOLS) $(BIN)
$(BIN)/kube-controller-manager $(BIN)/kube-scheduler $(BIN)/etcd: $(BIN)/kube-apiserver
	$(BUILD_CONTROL_PLANE) $(TOOLS) $(BIN)

$(OLDER_BIN)/kube-apiserver: $(OLDER_INPUTS)
	$(BUILD_CONTROL_PLANE) $(OLDER_TOOLS) $(OLDER_BIN)
$(OLDER_BIN)/kube-controller-manager $(OLDER_BIN)/kube-scheduler $(OLDER_BIN)/etcd: $(OLDER_BIN)/kube-apiserver
	$(BUILD_CONTROL_PLANE) $(OLDER_TOOLS) $(OLDER_BIN)

## vet: go vet every package, the controller-runtime and plugin modules' too.
vet:
	$(GO) vet ./...
	cd $(CR_MODULE) && $(GO) vet ./...
	cd $(PLUGIN_MODULE) && $(GO) vet ./...

## unit: the tests that need no control plane (integration tests skip, loudly),
## -short: the few that scaffold and build modules for minutes skip too.
unit:
	BINDKIT_BIN_DIR=/nonexistent $(GO) test -short -count=1 -ldflags=-w ./...
	cd $(CR_MODULE) && BINDKIT_BIN_DIR=/nonexistent $(GO) test -short -count=1 -ldflags=-w ./...
	cd $(PLUGIN_MODULE) && BINDKIT_BIN_DIR=/nonexistent $(GO) test -short -count=1 -ldflags=-w ./...

## controlplane: run a control plane until Ctrl-C and print how to point a
## package's integration tests at it (CONTROLPLANE_FLAGS=-workloads for the
## packages that run pods, -minor 1.36 for the older minor); see
## CONTRIBUTING.md, "The test loop".
controlplane: $(NEWEST_BINS) $(KWOK)
	$(GO) run ./hack/controlplane $(CONTROLPLANE_FLAGS)

.PHONY: generate
## generate: regenerate the examples' deep copies and CRDs with `bindkit generate`
## (controller-gen, built by go run at the version cmd/bindkit pins). The
## packages and CRD directories are listed in cmd/bindkit/generate_test.go,
## whose test (part of `make test`) fails when a generated file is stale.
generate:
	$(GO) test -count=1 -run '^(TestRepositoryGeneratedFilesAreCurrent|TestBuildModulesAreTheToolsModules)$$' ./cmd/bindkit -args -update

.PHONY: api
## api: regenerate the exported API files of api/ after a deliberate change
## to the API (test/api: TestAPI, part of `make test`, fails until they
## match); review their diff with the change.
api:
	$(GO) test -count=1 -run '^TestAPI$$' ./test/api -args -update

.PHONY: bench
BENCH_COUNT ?= 6

## bench: bindkit against its floors, knative.dev/pkg and controller-runtime (see bench/RESULTS.md).
bench: $(NEWEST_BINS)
	@# The bench module has its own go.mod, so knative and controller-runtime
	@# never become dependencies of the framework. A failed benchmark still
	@# prints through tee, so the grep turns it into a failed target.
	@# BenchmarkBind builds the example controller and binds 1,000
	@# Deployments through it (BINDKIT_BENCH_BIND_SIZES=1000,10000 adds
	@# 10,000); BINDKIT_BENCH_MEMORY=1 adds the subject cache at 10,000.
	cd bench && $(GO) test -run '^$$' -bench . -benchmem -count $(BENCH_COUNT) -timeout 6h ./... | tee results.txt
	@! grep -Eq '^(FAIL|--- FAIL|panic:)' bench/results.txt
	@# Admission decision and round trip against knative and controller-runtime.
	cd bench && $(GO) tool benchstat -filter '.name:(Admit OR RoundTrip)' -col /impl results.txt | tee benchstat.txt
	@# bindkit alone, by number of Bindings: the index must keep n=10000 near n=10.
	cd bench && $(GO) tool benchstat -filter '/impl:bindkit .name:Admit' -col /n results.txt | tee -a benchstat.txt
	@# The round trip against a bare TLS server with a canned answer.
	cd bench && $(GO) tool benchstat -filter '.name:RoundTrip' -col '/impl@(floor bindkit)' results.txt | tee -a benchstat.txt
	@# Binding through the example binary, and in process, against the client-go floor.
	cd bench && $(GO) tool benchstat -filter '.name:(Bind OR Reconcile1000)' -col '/impl@(floor bindkit)' results.txt | tee -a benchstat.txt
	@# The same kind inside a controller-runtime Manager (controllerruntime/), against bindkit's own process and server.
	cd bench && $(GO) tool benchstat -filter '.name:Bind' -col '/impl@(bindkit manager)' results.txt | tee -a benchstat.txt
	cd bench && $(GO) tool benchstat -filter '.name:RoundTrip' -col '/impl@(bindkit bindkit-in-manager)' results.txt | tee -a benchstat.txt
	@# The subject cache against a typed informer (only with BINDKIT_BENCH_MEMORY=1).
	cd bench && $(GO) tool benchstat -filter '.name:SubjectCache10000' -col '/impl@(typed bindkit)' results.txt | tee -a benchstat.txt
