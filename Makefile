# bindkit's build entry points. `make test` is what CI runs (.ci/run).

GO      ?= go
BIN     := $(CURDIR)/bin
TOOLS   := hack/tools
# The control-plane binaries are rebuilt only when the tools module changes.
TOOLS_INPUTS := $(TOOLS)/go.mod $(TOOLS)/go.sum $(TOOLS)/etcd/main.go

export BINDKIT_BIN_DIR := $(BIN)

.PHONY: demo test tools vet unit

## demo: run the githubbinding walkthrough on a local control plane.
demo: tools
	$(GO) run ./hack/demo

## test: build the control plane if needed, then vet and run every test with -race.
test: tools vet
	$(GO) test -race -count=1 ./...

## tools: build kube-apiserver and etcd into bin/ (first time ~10 min on 2 cores).
tools: $(BIN)/kube-apiserver $(BIN)/etcd

$(BIN)/kube-apiserver: $(TOOLS_INPUTS)
	@echo "building kube-apiserver from the Go module proxy (first time: about 10 minutes on 2 cores)"
	cd $(TOOLS) && $(GO) build -o $@ k8s.io/kubernetes/cmd/kube-apiserver

$(BIN)/etcd: $(TOOLS_INPUTS)
	@echo "building etcd from the Go module proxy"
	cd $(TOOLS) && $(GO) build -o $@ ./etcd

## vet: go vet every package.
vet:
	$(GO) vet ./...

## unit: the tests that need no control plane (integration tests skip, loudly).
unit:
	BINDKIT_BIN_DIR=/nonexistent $(GO) test -count=1 ./...

# The API packages whose deep-copy methods deepcopy-gen writes.
GENERATE_PKGS := ./examples/githubbinding/pkg/apis/bindings/v1alpha1 ./examples/configbinding/pkg/apis/bindings/v1alpha1

.PHONY: generate
## generate: regenerate zz_generated.deepcopy.go with deepcopy-gen from the tools module.
generate:
	@# `go tool -n` builds the tool from the tools module and prints its path;
	@# it runs from the repository root, because the packages it reads are in
	@# the framework module, not in the tools module.
	DEEPCOPY_GEN=$$(cd $(TOOLS) && $(GO) tool -n deepcopy-gen) && \
		$$DEEPCOPY_GEN --go-header-file hack/boilerplate.go.txt --output-file zz_generated.deepcopy.go $(GENERATE_PKGS)

.PHONY: bench
BENCH_COUNT ?= 6

## bench: bindkit against its floors, knative.dev/pkg and controller-runtime (see bench/RESULTS.md).
bench: tools
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
	@# The subject cache against a typed informer (only with BINDKIT_BENCH_MEMORY=1).
	cd bench && $(GO) tool benchstat -filter '.name:SubjectCache10000' -col '/impl@(typed bindkit)' results.txt | tee -a benchstat.txt
