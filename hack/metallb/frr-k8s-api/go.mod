// A local stand-in for github.com/metallb/frr-k8s, whose zip the Go module
// proxy refuses. hack/metallb/build.sh replaces the module with this copy: MetalLB's
// controller and speaker only import its api/v1beta1 types (in frr-k8s mode, which
// we never run). Written by us from what MetalLB v0.16 imports; not frr-k8s code.
module github.com/metallb/frr-k8s

go 1.26.0

require k8s.io/apimachinery v0.37.1
