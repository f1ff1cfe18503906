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
# script) changes. One build makes all three binaries; kube-apiserver stands
# for it, and the other two are rebuilt only if they go missing.
NEWEST_INPUTS := $(TOOLS)/go.mod $(TOOLS)/go.sum $(TOOLS)/etcd/main.go $(BUILD_CONTROL_PLANE)
OLDER_INPUTS  := $(OLDER_TOOLS)/go.mod $(OLDER_TOOLS)/go.sum $(OLDER_TOOLS)/etcd/main.go $(BUILD_CONTROL_PLANE)

NEWEST_BINS   := $(BIN)/kube-apiserver $(BIN)/kube-controller-manager $(BIN)/etcd
OLDER_BINS    := $(OLDER_BIN)/kube-apiserver $(OLDER_BIN)/kube-controller-manager $(OLDER_BIN)/etcd

export BINDKIT_BIN_DIR := $(BIN)

.PHONY: demo test tools vet unit

## demo: run the githubbinding walkthrough on a local control plane.
demo: $(NEWEST_BINS)
	$(GO) run ./hack/demo

# The packages whose tests start a control plane (they import internal/testenv,
# envtest or bindingtest).
CONTROL_PLANE_PKGS = $(shell $(GO) list -f '{{.ImportPath}} {{join .TestImports " "}} {{join .XTestImports " "}}' ./... | awk '/ github.com\/bindkit\/bindkit\/(internal\/testenv|envtest|bindingtest)( |$$)/ {print $$1}')

## test: build the control planes if needed, vet, run every test with -race
## against the newest minor, then the control-plane tests against the older.
test: tools vet
	$(GO) test -race -count=1 ./...
	@echo "integration tests against Kubernetes $(OLDER_MINOR):"
	BINDKIT_KUBE_MINOR=$(OLDER_MINOR) $(GO) test -race -count=1 $(CONTROL_PLANE_PKGS)

## tools: build kube-apiserver, kube-controller-manager and etcd of both minors
## (first time: about 6 minutes for 1.37 and 4.5 for 1.36 on 2 idle cores).
tools: $(NEWEST_BINS) $(OLDER_BINS)

$(BIN)/kube-apiserver: $(NEWEST_INPUTS)
	$(BUILD_CONTROL_PLANE) $(TOOLS) $(BIN)
$(BIN)/kube-controller-manager $(BIN)/etcd: $(BIN)/kube-apiserver
	$(BUILD_CONTROL_PLANE) $(TOOLS) $(BIN)

$(OLDER_BIN)/kube-apiserver: $(OLDER_INPUTS)
	$(BUILD_CONTROL_PLANE) $(OLDER_TOOLS) $(OLDER_BIN)
$(OLDER_BIN)/kube-controller-manager $(OLDER_BIN)/etcd: $(OLDER_BIN)/kube-apiserver
	$(BUILD_CONTROL_PLANE) $(OLDER_TOOLS) $(OLDER_BIN)

## vet: go vet every package.
vet:
	$(GO) vet ./...

## unit: the tests that need no control plane (integration tests skip, loudly).
unit:
	BINDKIT_BIN_DIR=/nonexistent $(GO) test -count=1 ./...

.PHONY: generate
## generate: regenerate the examples' deep copies and CRDs with `bindkit generate`
## (controller-gen, built by go run at the version cmd/bindkit pins). The
## packages and CRD directories are listed in cmd/bindkit/generate_test.go,
## whose test (part of `make test`) fails when a generated file is stale.
generate:
	$(GO) test -count=1 -run '^(TestRepositoryGeneratedFilesAreCurrent|TestBuildModulesAreTheToolsModules)$$' ./cmd/bindkit -args -update

.PHONY: bench
BENCH_COUNT ?= 6

## bench: bindkit side by side with knative.dev/pkg and controller-runtime (see bench/RESULTS.md).
bench:
	@# The bench module has its own go.mod, so knative and controller-runtime
	@# never become dependencies of the framework. A failed benchmark still
	@# prints through tee, so the grep turns it into a failed target.
	cd bench && $(GO) test -run '^$$' -bench . -benchmem -count $(BENCH_COUNT) ./... | tee results.txt
	@! grep -Eq '^(FAIL|--- FAIL|panic:)' bench/results.txt
	cd bench && $(GO) tool benchstat -col /impl results.txt | tee benchstat.txt
	@# bindkit alone, by number of Bindings: the index must keep n=10000 near n=10.
	cd bench && $(GO) tool benchstat -filter '/impl:bindkit .name:Admit' -col /n results.txt | tee -a benchstat.txt
