# multicloud-ccm: one command per job. See README.md and docs/testing.md.
#
#   make demo    the local demo: a real control plane, simulated clouds, the CCM
#   make test    every test: unit (-race), fuzz smoke, real Keystone + Octavia,
#                end-to-end against a real kube-apiserver + etcd
#   make build / lint / bench / e2e / unit / fuzz / control-plane / tools

SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c

# The version must read vX.Y.Z[-...]: component-base's metrics registry
# panics at start-up on anything else.
VERSION ?= $(shell git describe --tags --match 'v[0-9]*' --dirty 2>/dev/null || echo "v0.0.0-$$(git rev-parse --short HEAD 2>/dev/null || echo unknown)")
OUT     := $(CURDIR)/_output
BIN     := $(OUT)/bin
TOOLS   := $(OUT)/tools/bin
GO      ?= go
export CGO_ENABLED := 0
# hack/goflags.sh: one list for every build (the compile cache is shared
# only between builds with the same flags).
export GOFLAGS := $(shell bash $(dir $(abspath $(lastword $(MAKEFILE_LIST))))hack/goflags.sh)

GOLANGCI_LINT_VERSION := v2.15.0
LDFLAGS := -s -w -X k8s.io/component-base/version.gitVersion=$(VERSION)

# Everything but the end-to-end suites and the chaos judge, which need the
# built binaries and run under make e2e and make chaos-slice. The slowest
# packages first (pkg/backends/openstack waits on the real stack for about
# a quarter hour): go test starts its packages' builds and runs in the
# order listed, two at a time on 2 cores, so the others run beside them
# instead of after. go list keeps that order and lists each package once.
# make unit UNIT_PKGS=./pkg/config tests only those.
UNIT_FIRST := ./pkg/backends/openstack ./pkg/backends/aws ./pkg/router
UNIT_PKGS = $(shell $(GO) list $(UNIT_FIRST) ./... | grep -v -e '/test/e2e' -e '/test/chaos')
# Of those, the ones run without -race, before the others: pkg/admission
# writes the admission policy; its code starts no goroutine and keeps no
# state between calls, and its tests evaluate the generated policy with
# cel-go about 30,000 times (TestAdmissionDifferential). Under -race that
# was 233 s of the unit stage (session 54) and about 7 times the CPU of the
# same run without it (22 s). Its tests' parallel subtests
# (TestAdmissionDifferential, TestPolicyAgreesWithReaders) share only
# compiled cel-go programs (safe for concurrent use), the immutable
# annotation registry and a sync.Map of the tests' own: that sharing is
# not race-checked. Every other package that starts goroutines, or whose
# tests do (crosscheck runs the backends), stays under -race.
NORACE_PKGS := github.com/multicloud-ccm/multicloud-ccm/pkg/admission

# go test vets every package it tests (a subset of go vet's checks) unless
# given -vet=off. make test's vet stage runs go vet ./... on all of them
# first, so hack/stages.sh gives the later stages TESTVET=off; make unit
# (e2e, chaos, fuzz, openstack-test) alone still vets.
TESTVET ?=
GOTESTVET = $(if $(TESTVET),-vet=$(TESTVET))

# The builds e2e needs (and chaos, bench, demo in part) take a lock of
# their own first, so that two makes in one _output (make test's
# background build of e2e-deps beside its chaos slice, or a second make)
# never build the same thing at once: the later waits, then finds it built.
# The kubelet's build shares control-plane's scratch module, the image
# reads the binary: each takes its neighbour's lock.
LOCK = mkdir -p $(OUT)/.locks && flock $(OUT)/.locks/$(1)
FUZZTIME ?= 10s

.PHONY: later-deps fuzz-deps upstream-aws-deps e2e-deps chaos chaos-slice image kubelet docs golden helm manifests manifests-check all build test unit fuzz e2e openstack-test bench demo lint vet upstream-aws promrules control-plane tools clean openstack-up openstack-down metallb gobgp

all: build

build: $(BIN)/multicloud-ccm

$(BIN)/multicloud-ccm: FORCE
	@mkdir -p $(BIN)
	$(call LOCK,build) $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $@ ./cmd/multicloud-ccm

FORCE:

control-plane:
	$(call LOCK,kube) env GOGC=$(BUILD_GOGC) OUT=$(BIN) bash hack/build-control-plane.sh

# image: the container image, reproducibly, without a container engine
# (hack/image/build.sh): an OCI layout and a docker-archive under
# _output/image; prints the digest and size.
image: build
	$(call LOCK,build) env VERSION=$(VERSION) bash hack/image/build.sh

# kubelet: a real node's binaries (kubelet, kube-scheduler,
# kube-controller-manager v1.37.1, from control-plane's scratch module) and
# the locally built pause image, for test/e2e/node.
kubelet: control-plane image
	$(call LOCK,kube) bash -c 'OUT=$(BIN) bash hack/kubelet/build.sh && bash hack/kubelet/pause-image.sh'

## test: every test, end-to-end included, and the linters. The real Keystone + Octavia is
## started first: the OpenStack backend's tests and e2e scenarios use it.
## Make stops at the first suite that fails, so the suites that fail most
## often for what they cost come first: vet (seconds once compiled), the
## unit tests (the most failures in CI), the chaos slice (a few minutes
## once the binary and control plane are built), e2e; then the ones that
## rarely fail: promrules (seconds once helm is built), the fuzz smoke
## (about 10 s a target after the instrumented builds) and upstream-aws,
## last: its cold build (upstream's dependency tree) measured 7 min wall
## (8 min CPU) on a loaded 2-core machine with the module cache warm, 10 min
## with the modules downloaded. .ci/run prints what failed at the end.
## hack/stages.sh runs the stages one after the other (make -j included),
## times each into _output/stages.tsv, gives the stages after vet
## TESTVET=off, and builds e2e-deps, then later-deps (the fuzz and
## upstream-aws builds), in the background (nice 10) while the unit tests
## run (docs/testing.md, "CI's stages and their times"). A+B runs B beside
## A, each with its own line, time and verdict: the OpenStack stack's
## start (56% of the CPU busy alone, mostly waiting on its services; it
## has a retry) beside vet, upstream-aws (13% busy alone: it mostly waits
## on its fakes) beside fuzz, and beside e2e (whose packages mostly wait:
## see E2E_P) the linters (at nice 10: e2e's waits have bounds; before,
## .ci/run ran them after every test) and promrules.
TEST_STAGES := vet+openstack-up unit chaos-slice e2e+lint+promrules fuzz+upstream-aws
test:
	MAKE="$(MAKE)" OUT=$(OUT) BUILD_GOGC=$(BUILD_GOGC) bash hack/stages.sh $(TEST_STAGES)

# The Go garbage collector's target for the runs that only build (go vet,
# the control plane, and the background builds of hack/stages.sh): the
# compiler collects less often, at most five times its live heap. Building
# the CCM binary cold took 340 CPU-seconds at 400 against 368 and 386 at
# Go's default 100 (session 69), its largest compile 3.9 GB against 2.8.
# Not the tests: their binaries run with Go's default (make unit compiles
# at BUILD_GOGC and puts the caller's GOGC back for its binaries:
# TESTBIN_GOGC).
BUILD_GOGC ?= 400

vet:
	GOGC=$(BUILD_GOGC) $(GO) vet ./...

# Tests that need the real OpenStack stack read its environment from
# $(OUT)/openstack.env (written by make openstack-up); without it they skip,
# or fail when CI is set. -race needs cgo.
WITH_OS_ENV = if [ -f $(OUT)/openstack.env ]; then source $(OUT)/openstack.env; fi;

# go test -race runs in the workspace hack/race-workspace.sh writes: this
# module with upstream's service controller (k8s.io/cloud-provider) copied
# and one data race of upstream's fixed, which -race otherwise reports in
# whichever test a Node changes in while a Service syncs. The binary and
# every other build use the module as released.
RACE_GOWORK = ws=$$(GO=$(GO) bash hack/race-workspace.sh $(OUT)) || exit; export GOWORK=$$ws;

# The unit tests' compiles (under -race every dependency again: about 660
# CPU-seconds of a cold run) at BUILD_GOGC, as the builds: go test gets
# GOGC=$(BUILD_GOGC), and runs each test binary through -exec "$$tgogc",
# which puts back the GOGC the caller had (none: Go's default). The tests
# run as before; only the compiler collects less often.
TESTBIN_GOGC = tgogc="env -u GOGC"; [ -z "$${GOGC+x}" ] || tgogc="env GOGC=$$GOGC";

# Both go tests run whatever the first's result: a failing admission test
# hides no failure of the other packages; the recipe fails if either did.
# Ctrl-C (or SIGTERM) ends the recipe: go test exits 1 on it, and the
# -race run would otherwise start.
unit:
	trap 'exit 130' INT; trap 'exit 143' TERM; rc=0; $(TESTBIN_GOGC) \
	$(if $(filter $(NORACE_PKGS),$(UNIT_PKGS)),GOGC=$(BUILD_GOGC) $(GO) test -exec "$$tgogc" $(GOTESTVET) -count=1 -timeout 20m $(filter $(NORACE_PKGS),$(UNIT_PKGS)) || rc=$$?;) \
	$(if $(filter-out $(NORACE_PKGS),$(UNIT_PKGS)),( $(WITH_OS_ENV) $(RACE_GOWORK) CGO_ENABLED=1 GOGC=$(BUILD_GOGC) $(GO) test -exec "$$tgogc" $(GOTESTVET) -race -count=1 -timeout 40m $(filter-out $(NORACE_PKGS),$(UNIT_PKGS)) ) || rc=$$?;) \
	exit $$rc

fuzz:
	TESTVET=$(TESTVET) bash hack/fuzz.sh $(FUZZTIME)

# Upstream's AWS provider (k8s.io/cloud-provider-aws) unmodified against
# internal/awsfake: its own Go module (test/upstream-aws), for upstream's
# heavy dependency tree stays out of ours. Part of make test.
upstream-aws: build control-plane
	cd test/upstream-aws && $(GO) vet ./... && $(GO) test -vet=off -count=1 -timeout 30m ./...

# What the fuzz and upstream-aws stages build before their first test, built
# ahead: make test builds it in the background (nice 10) after e2e-deps,
# while the unit and e2e tests run (hack/stages.sh). fuzz-deps: each fuzz
# target's instrumented test binary, kept in _output/fuzz-bin (hack/fuzz.sh
# --build-only); upstream-aws-deps: go vet's and go test's compile of
# test/upstream-aws (upstream's dependency tree) and upstream's CCM binary,
# where the two-CCM test looks for it (_output/upstream-aws/VERSION/);
# and golangci-lint, first: make test's lint stage, beside e2e, waits for
# this build (hack/stages.sh) and would otherwise install it itself.
later-deps: $(TOOLS)/golangci-lint fuzz-deps upstream-aws-deps

fuzz-deps:
	bash hack/fuzz.sh --build-only

upstream-aws-deps:
	cd test/upstream-aws && v=$$($(GO) list -m -f '{{.Version}}' k8s.io/cloud-provider-aws) && \
	  bin=$(OUT)/upstream-aws/$$v/aws-cloud-controller-manager && \
	  { [ -x "$$bin" ] || $(GO) build -o "$$bin" k8s.io/cloud-provider-aws/cmd/aws-cloud-controller-manager; } && \
	  $(GO) vet ./... && $(GO) test -vet=off -c -o /dev/null .

# The chart's alert expressions and dashboard queries through Prometheus's
# own PromQL parser: its own Go module (test/promrules), for
# github.com/prometheus/prometheus needs newer client_golang, otel and grpc
# than ours. Part of make test; the metric names are checked against the
# binary by test/e2e/chart (TestMonitoringMetricsExported).
promrules: helm
	cd test/promrules && $(GO) vet ./... && $(GO) test -vet=off -count=1 ./...

# A start that fails is tried once more from a stopped stack (the second
# failure fails the target): stop 47's CI lost its whole run to one
# neutron-server start.
openstack-up:
	@mkdir -p $(OUT)
	bash hack/openstack/up.sh > $(OUT)/openstack.env.tmp || { \
	  echo "openstack-up: the start failed; stopping the stack and starting it once more" >&2; \
	  bash hack/openstack/down.sh --quiet || true; \
	  bash hack/openstack/up.sh > $(OUT)/openstack.env.tmp; }
	mv $(OUT)/openstack.env.tmp $(OUT)/openstack.env

openstack-down:
	bash hack/openstack/down.sh
	rm -f $(OUT)/openstack.env

# The OpenStack backend against a real Keystone + Octavia on loopback.
openstack-test: openstack-up
	$(TESTBIN_GOGC) $(WITH_OS_ENV) $(RACE_GOWORK) CGO_ENABLED=1 GOGC=$(BUILD_GOGC) $(GO) test -exec "$$tgogc" $(GOTESTVET) -race -count=1 -timeout 40m ./pkg/backends/openstack/...

# e2e-deps: what e2e needs built; make test builds it in the background
# while the unit tests run (hack/stages.sh).
e2e-deps: build control-plane helm image kubelet metallb gobgp

# The longest e2e packages first, for the reason UNIT_FIRST is: go test
# runs E2E_P packages at a time in the order listed, and test/e2e/planswitch
# (7-10 minutes with the OpenStack worlds, mostly waiting on Octavia) and
# test/e2e/multi (3-4 minutes) listed in their alphabetical place started
# after most of the others and ran on alone at the stage's end.
E2E_FIRST := ./test/e2e/planswitch ./test/e2e/multi
E2E_PKGS = $(shell $(GO) list $(E2E_FIRST) ./test/e2e/...)
# Four e2e packages at a time, not go test's default of one per core: each
# package mostly waits (on its control plane, the clouds' fakes, Octavia,
# the CCM's periods), so two at a time kept the 2-core machine 46% busy
# for 489 s of a cold run; four at a time, the same tests with their
# binaries built, took 283 s, each package within a few seconds of its
# time two at a time (docs/testing.md).
E2E_P ?= 4

e2e: e2e-deps
	$(WITH_OS_ENV) $(GO) test $(GOTESTVET) -p $(E2E_P) -count=1 -timeout 40m $(E2E_PKGS)

# chaos: the chaos judge (test/chaos, docs/testing.md): seeded random
# operations on Services, Nodes, live reloads and the clouds, with faults
# (leader killed, AWS throttling or down), against the built binary (two
# replicas under leader election); invariants checked after every step and
# at quiescence; a violation shrunk to the fewest steps that still fail and
# written as a replay file. SEED (default fresh), STEPS (40), DURATION
# (fresh seeds for that long; default one sequence), REPLAY (a replay
# file), SHRINK (the shrinker's budget, 20m), SETTLE (330s), IGNORE
# (violation classes only logged). With the OpenStack stack up
# ($(OUT)/openstack.env) it adds the backend os (CHAOS_OS=0: not).
chaos: build control-plane
	$(WITH_OS_ENV) SEED=$(SEED) STEPS=$(STEPS) DURATION=$(DURATION) REPLAY=$(REPLAY) SHRINK=$(SHRINK) SETTLE=$(SETTLE) IGNORE=$(IGNORE) TESTVET=$(TESTVET) bash hack/chaos.sh

# chaos-slice: the judge's part of make test: the fixed seeds and one
# fresh seed drawn from the tree under test (printed with its replay
# command; CHAOS_FRESH_SEED sets it, CHAOS_FRESH=0 leaves it out), 25
# steps each, about 2-3 minutes on 2 cores; OpenStack left out unless
# CHAOS_OS=1.
chaos-slice: build control-plane
	$(WITH_OS_ENV) SLICE=1 TESTVET=$(TESTVET) bash hack/chaos.sh

bench: build control-plane metallb
	$(WITH_OS_ENV) bash hack/bench.sh

# bench-scale: the scale benchmark (test/scale, docs/scale.md): kwok keeps
# N nodes Ready on the real kube-apiserver, the built binary runs with the
# chart's flags, bare metal and the AWS fake; prints a table. Not part of
# make test (hours at the largest sizes). Pick sizes with SCALE_NODES,
# SCALE_SERVICES and SCALE_CLOUDS (e.g. SCALE_NODES=100 SCALE_SERVICES=1000
# SCALE_CLOUDS=baremetal make bench-scale).
.PHONY: bench-scale
bench-scale: build control-plane
	bash hack/kwok/build.sh
	SCALE_BENCH=1 $(GO) test -count=1 -timeout 600m -v -run 'TestScale$$' ./test/scale/ 2>&1 | tee $(OUT)/bench-scale.txt

# metallb: MetalLB's controller, speaker and CRDs (v0.16.2, from the Go
# module proxy) under $(OUT)/metallb, for the bare-metal wire tests and the
# throughput benchmark beside MetalLB (hack/metallb/build.sh; cached).
metallb:
	$(call LOCK,metallb) bash hack/metallb/build.sh

# gobgp: GoBGP's daemon and CLI (v3.37.0, from the Go module proxy) under
# $(OUT)/gobgp, the BGP router of the wire tests (hack/gobgp/build.sh; cached).
gobgp:
	$(call LOCK,gobgp) bash hack/gobgp/build.sh

demo: build control-plane
	$(GO) run ./test/e2e/cmd/demo

tools: $(TOOLS)/golangci-lint helm

# helm, pinned, built from the Go module proxy (the chart's tests use it).
helm:
	$(call LOCK,helm) bash hack/helm/install.sh

# deploy/: the chart rendered for users without Helm; manifests-check fails
# when deploy/ is stale.
manifests: helm
	bash hack/helm/manifests.sh

manifests-check: helm
	bash hack/helm/manifests.sh --check

# Under a lock: make test's background later-deps and its lint stage may
# both get here; the second waits and finds it installed.
$(TOOLS)/golangci-lint:
	@mkdir -p $(TOOLS)
	$(call LOCK,golangci-lint) env GOBIN=$(TOOLS) nice -n 10 $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)

# At nice 10 (its install too): make test runs it beside e2e.
lint: $(TOOLS)/golangci-lint
	nice -n 10 $(TOOLS)/golangci-lint run ./...

# docs/annotations.md is generated from the annotation constants' doc
# comments; a test fails when it is stale.
docs:
	$(GO) run ./hack/gen-docs

golden:
	$(GO) test -count=1 ./test/e2e/chart -run TestGolden -update

clean:
	rm -rf $(OUT)
