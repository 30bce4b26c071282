# informerd — build, test and run. `make help` lists the targets.
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := build

GO        ?= go
BIN       := $(CURDIR)/bin
TOOLS     := $(BIN)/tools
GOTOOL    := $(GO) tool -modfile=$(CURDIR)/tools/go.mod
BUF       := $(GO) tool -modfile=$(CURDIR)/tools/buf/go.mod buf
TEST_FLAGS ?= -race -count=1 -timeout=20m
export INFORMERD_CONTROLPLANE_DIR ?= $(BIN)/controlplane/current

.PHONY: help build test manifests lint proto verify verify-proto verify-tidy update-monitoring-crds run testenv node-deps python-deps fuzz chaos bench bench-short bench-go bench-authz conformance clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

build: ## build informerd and informerctl into bin/
	$(GO) build -o $(BIN)/informerd ./cmd/informerd
	$(GO) build -o $(BIN)/informerctl ./cmd/informerctl

testenv: ## build the pinned kube-apiserver, etcd and kubectl (each skipped when already built)
	hack/controlplane/build.sh

test: verify testenv node-deps python-deps $(TOOLS)/helm ## everything CI checks: verify, unit and integration tests with -race on the real control plane, one pass of each Go benchmark, a short pass of every fuzz target, the benchmark harness in smoke mode
	$(GO) test $(TEST_FLAGS) ./...
	$(GO) test -run='^$$' -bench=. -benchtime=1x ./...
	hack/fuzz.sh $(FUZZTIME_TEST)
	$(GO) run ./bench -mode=smoke

CHAOS_DURATION ?= 20m
chaos: testenv ## the chaos suite: a random schedule of faults for CHAOS_DURATION (default 20m) with 1000 clients; CHAOS_SEED replays one; make test runs each fault once
	CHAOS_DURATION=$(CHAOS_DURATION) CHAOS_REPORT=$(CURDIR)/bin/chaos-report.txt $(GO) test -count=1 -v -timeout=0 -run TestChaos ./internal/chaos/ | grep -v '^[IWE][0-9]'
	@echo "report: bin/chaos-report.txt"

FUZZTIME ?= 1m
FUZZTIME_TEST ?= 4s
fuzz: ## run every fuzz target for FUZZTIME each (default 1m); make test runs them for 4s
	hack/fuzz.sh $(FUZZTIME)

PYTHON_DEBS := python3-grpcio python3-protobuf protobuf-compiler libprotobuf-dev protobuf-compiler-grpc python3-kubernetes
python-deps: ## install Debian's packages the Python examples need (apt-get, as root; skipped when present)
	@if /usr/bin/python3 -c 'import grpc, google.protobuf, kubernetes' 2>/dev/null && [[ -x /usr/bin/protoc && -x /usr/bin/grpc_python_plugin && -f /usr/include/google/protobuf/field_mask.proto ]]; then :; \
	else apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(PYTHON_DEBS); fi

node-deps: examples/node/node_modules/.package-lock.json examples/kube-api/node/node_modules/.package-lock.json ## install the Node.js examples' pinned packages (npm ci)

examples/%/node_modules/.package-lock.json: examples/%/package.json examples/%/package-lock.json
	cd examples/$* && npm ci --no-audit --no-fund

lint: ## gofmt, go vet, staticcheck
	@out="$$(gofmt -l $$(git ls-files '*.go'))"; if [[ -n "$$out" ]]; then echo "gofmt needed in:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GOTOOL) staticcheck ./...

$(TOOLS)/helm: tools/helm/go.mod tools/helm/go.sum ## helm v4, pinned in tools/helm, for the chart's tests (deploy/helm_test.go)
	cd tools/helm && $(GO) build -o $(TOOLS)/helm helm.sh/helm/v4/cmd/helm

$(TOOLS)/protoc-gen-go $(TOOLS)/protoc-gen-go-grpc: tools/go.mod tools/go.sum
	$(GO) build -modfile=tools/go.mod -o $(TOOLS)/ google.golang.org/protobuf/cmd/protoc-gen-go google.golang.org/grpc/cmd/protoc-gen-go-grpc

proto: $(TOOLS)/protoc-gen-go $(TOOLS)/protoc-gen-go-grpc ## lint the .proto files and regenerate the checked-in .pb.go
	cd api/proto && $(BUF) lint
	cd api/proto && PATH="$(TOOLS):$$PATH" $(BUF) generate

verify: lint verify-proto verify-tidy ## fail when lint fails or generated code or go.mod is stale

verify-proto: $(TOOLS)/protoc-gen-go $(TOOLS)/protoc-gen-go-grpc ## lint the .proto files; fail if the .pb.go in the tree differ from freshly generated ones
	cd api/proto && $(BUF) lint
	@tmp="$$(mktemp -d)"; trap 'rm -rf "$$tmp"' EXIT; \
	(cd api/proto && PATH="$(TOOLS):$$PATH" $(BUF) generate -o "$$tmp"); \
	diff -r -x '*.proto' -x '*.yaml' "$$tmp" api/proto >/dev/null || { \
		diff -r -x '*.proto' -x '*.yaml' "$$tmp" api/proto | head -20 || true; \
		echo "generated code in api/proto is stale or was edited by hand: run 'make proto'"; exit 1; }

verify-tidy: ## fail if go mod tidy would change any module
	@for dir in . tools tools/buf tools/helm tools/kustomize hack/controlplane/etcd hack/controlplane/kube-apiserver hack/conformance; do \
		(cd $$dir && $(GO) mod tidy -diff) || { echo "go.mod in $$dir is not tidy: run 'cd $$dir && go mod tidy'"; exit 1; }; \
	done

KUSTOMIZE := $(GO) tool -modfile=$(CURDIR)/tools/kustomize/go.mod kustomize
manifests: ## render every kustomization under deploy/ into bin/manifests/
	@mkdir -p $(BIN)/manifests
	$(KUSTOMIZE) build deploy/base > $(BIN)/manifests/base.yaml
	$(KUSTOMIZE) build deploy/examples/sidecar > $(BIN)/manifests/sidecar.yaml
	$(KUSTOMIZE) build deploy/examples/kube-api-sidecar > $(BIN)/manifests/kube-api-sidecar.yaml
	$(KUSTOMIZE) build deploy/examples/shared-client > $(BIN)/manifests/shared-client.yaml
	$(KUSTOMIZE) build deploy/examples/shared-statefulset > $(BIN)/manifests/shared-statefulset.yaml
	$(KUSTOMIZE) build deploy/examples/tiered > $(BIN)/manifests/tiered.yaml
	$(KUSTOMIZE) build deploy/monitoring > $(BIN)/manifests/monitoring.yaml
	@echo "rendered into bin/manifests/"

PROMETHEUS_OPERATOR_VERSION := v0.85.0
update-monitoring-crds: ## copy the Prometheus Operator CRDs deploy_test.go installs from the Go module proxy
	@dir=$$($(GO) mod download -json github.com/prometheus-operator/prometheus-operator@$(PROMETHEUS_OPERATOR_VERSION) | sed -n 's/.*"Dir": "\(.*\)",/\1/p'); \
	for f in podmonitors servicemonitors; do \
		install -m 0644 $$dir/example/prometheus-operator-crd/monitoring.coreos.com_$$f.yaml deploy/testdata/crds/; \
	done

run: build testenv ## start a local kube-apiserver + etcd, sample objects, and informerd (or use $KUBECONFIG)
	$(GO) run ./hack/devenv -- $(BIN)/informerd $(ARGS)

bench: testenv ## the benchmark harness, full sizes, against kube-apiserver and client-go: docs/benchmarks/full/ (see docs/benchmarks.md)
	$(GO) run ./bench -mode=full

bench-short: testenv ## the benchmark harness at small sizes (about 12 minutes on 2 cores): docs/benchmarks/short/
	$(GO) run ./bench -mode=short

BENCH_COUNT ?= 3
bench-go: ## the Go microbenchmarks of each package (BENCH_COUNT times each, default 3)
	$(GO) test -run='^$$' -bench=. -benchmem -count=$(BENCH_COUNT) ./...

bench-authz: testenv ## what the checks before a cached read cost on the Kubernetes API: reviews warm and cold, impersonation, selectors, audit (BENCH_COUNT times, default 3)
	$(GO) test -run='^$$' -bench=BenchmarkKubeAPIAuthorization -benchtime=500x -benchmem -count=$(BENCH_COUNT) ./internal/e2e

conformance: testenv ## Kubernetes' API-machinery e2e specs against kube-apiserver and through informerd: bin/conformance/report.md (builds bin/conformance/e2e.test first, about 30 minutes once)
	hack/conformance/build.sh
	INFORMERD_CONFORMANCE_E2E=$(BIN)/conformance/e2e.test $(GO) test -count=1 -v -timeout=4h -run='^TestConformance$$' ./internal/e2e/

clean: ## remove built binaries (keeps the control plane build)
	rm -rf $(BIN)/informerd $(BIN)/informerctl $(TOOLS)
