#!/usr/bin/env bash
# Prints the go command's flags (GOFLAGS) for every build and test of this
# repository: the Makefile exports them, and the scripts that build tools
# from the module proxy (hack/build-control-plane.sh, hack/kubelet,
# hack/metallb, hack/helm, hack/image) set them too. One list, because Go's
# build cache shares a compiled package between two builds only when their
# compile flags match: kube-apiserver's build reuses the client-go, api and
# apiserver packages go vet compiled for this module (docs/testing.md).
#
#   -buildvcs=false            no VCS stamp (CI checks out without .git
#                              metadata the go command can read)
#   -trimpath                  reproducible: no local paths in binaries
#   -gcflags=all=-dwarf=false  no DWARF debugging information from the
#   -ldflags=-w                compiler and the linker: about a sixth of
#                              the compiler's CPU and a quarter of the
#                              linker's (docs/testing.md). Stack traces,
#                              the race detector's reports and
#                              runtime.Caller read the pcln table, which
#                              stays; only a debugger (dlv) needs DWARF:
#                              build with GOFLAGS= for one. A build that
#                              passes -ldflags itself (make build, the
#                              tools) replaces the -w.
echo "-buildvcs=false -trimpath -gcflags=all=-dwarf=false -ldflags=-w"
