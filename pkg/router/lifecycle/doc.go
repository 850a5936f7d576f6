// Package lifecycle is the Service lifecycle of one configuration: a
// Balancer answers the load-balancer calls (GetLoadBalancer,
// EnsureLoadBalancer, UpdateLoadBalancer, EnsureLoadBalancerDeleted) by
// deciding which backends serve each Service and carrying that out:
//
//   - the decision (decision.go): the targets and the step taken in every
//     backend that may hold the Service's load balancer, which `plan`
//     prints (Decide);
//   - the targets (multi.go, classes.go): by loadBalancer.classes, the
//     multicloud-ccm.io/load-balancer-backend annotation or the default,
//     one or several backends, each ensured with the nodes it can target;
//   - the write-ahead record (record.go), the drains (drain.go), the
//     external-dns target while bare metal drains (dns.go), the addresses
//     each backend is handed (shown.go);
//   - what a controller that writes its own Service patches needs
//     (controller.go), the node re-sync's view of a Service (resync.go) and
//     the Services a reload re-routes (rerouted.go).
//
// Lifetime: a Balancer lives for one configuration (the router builds one
// per configuration, beside its dispatch.Nodes, which it shares). What it
// keeps across calls is not its own: the per-Service state (locks,
// deletion marks, the record and drains last written, the addresses
// shown) is the process's (process.Shared, with its svcstate.States), and
// what outlives the process is written in the API server, on the Service
// (the annotations and status whose values package svcstate defines). A
// Balancer is the process.Configuration the process's workers see.
//
// It imports nothing of the router: pkg/router holds the
// cloudprovider.Interface glue and the configuration generations, and
// hands its load-balancer calls down to this package; this package imports
// dispatch, process, svcstate and backend, below it.
package lifecycle
