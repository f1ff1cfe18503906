# bindkit's build entry points. `make test` is what CI runs (.ci/run).

GO      ?= go
BIN     := $(CURDIR)/bin
TOOLS   := hack/tools
# The control-plane binaries are rebuilt only when the tools module changes.
TOOLS_INPUTS := $(TOOLS)/go.mod $(TOOLS)/go.sum $(TOOLS)/etcd/main.go

export BINDKIT_BIN_DIR := $(BIN)

.PHONY: test tools vet unit

## test: build the control plane if needed, then vet and run every test with -race.
test: tools vet
	$(GO) test -race -count=1 ./...

## tools: build kube-apiserver and etcd into bin/ (first time ~7 min on 2 cores).
tools: $(BIN)/kube-apiserver $(BIN)/etcd

$(BIN)/kube-apiserver: $(TOOLS_INPUTS)
	@echo "building kube-apiserver from the Go module proxy (first time: about 7 minutes on 2 cores)"
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
