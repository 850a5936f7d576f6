// Package scale is the scale benchmark (make bench-scale, docs/scale.md):
// the built multicloud-ccm binary with the chart's flags on a real
// kube-apiserver and etcd, kwok keeping N Node objects Ready, S
// LoadBalancer Services, on bare metal and on the AWS fake (instances and
// NLBs). It measures what ClusterLoader2 measures for a cloud controller:
// node initialisation time, Service time-to-address (p50, p99), the
// load-balancer node-sync latency (one node excluded until every load
// balancer was updated), a 10 % node churn, and, per phase and in a quiet
// steady-state window, the CCM's CPU, RSS, API requests (the API server's
// audit log, by controller, verb and resource), log lines and cloud API
// calls. It prints one table per run and never passes or fails on the
// figures.
//
// It runs only when SCALE_BENCH=1 (make bench-scale sets it), so make
// test and make unit skip it. Sizes and clouds come from the environment:
//
//	SCALE_NODES=100,1000,5000   node counts
//	SCALE_SERVICES=1000,5000    Service counts
//	SCALE_CLOUDS=baremetal,aws  backends
//	SCALE_CHURN=0.1             fraction of nodes deleted and registered again
//	SCALE_STEADY=60s            steady-state window
//	SCALE_SYNC_TIMEOUT=5m       bound on the node-sync and churn waits
//	SCALE_CCM_ARGS=             more CCM flags (--controllers=*,service: upstream's service controller)
//	SCALE_AWS_RATE_LIMITS=      the aws backend's rateLimits (YAML flow map); empty: its default budget
//	SCALE_AWS_THROTTLE=         aws: the AWS fake throttles with AWS's documented buckets (off: it never throttles)
//	SCALE_AWS_RATE_LIMITS_SYNC= the rateLimits a live reload switches the aws cells to before the node sync ("default": its default budget)
//	SCALE_AWS_TARGET_TYPE=      instance (default) or ip: the NLBs' target type (aws-load-balancer-nlb-target-type);
//	                            with ip, a churn re-targets every NLB by address (the router's batched re-targets),
//	                            and the churn rows count each NLB's target updates and re-targets
//	SCALE_CCM_PROFILE=          phases (init,services,node sync,churn,steady) to record the CCM's CPU profile in,
//	                            from its /debug/pprof; the cell's table.txt splits the phase's CPU per Service by package
//	SCALE_STOP_AFTER=           services: end each cell after its Services phase
//	SCALE_OUT=_output/scale     where the table and each run's logs are kept
package scale
