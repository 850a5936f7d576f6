// Package upstreamaws runs upstream's AWS cloud provider,
// k8s.io/cloud-provider-aws (pkg/providers/v1), unmodified against
// internal/awsfake: its node sweep (InstancesV2) and NLB lifecycle must pass
// there as they would against AWS, and the benchmarks measure it beside ours
// on the same fake. It is its own Go module because upstream's dependency
// tree is heavy and pins k8s.io versions of its own; `make upstream-aws`
// runs it, as part of `make test`.
package upstreamaws
