// Package svcstate is what the router keeps about a Service (and a Node)
// beyond one configuration, in two places:
//
//   - in the API server, on the Service itself: record.go (the record,
//     multicloud-ccm.io/load-balancer-backends: where a load balancer may
//     live), draining.go (multicloud-ccm.io/load-balancer-draining: when
//     each drain ends) and dnstarget.go (external-dns's target annotation
//     while bare metal drains). These are values, parsed from and written
//     to annotations; they survive restarts and leader changes.
//   - in the process: states.go (States: per Service the lock, deletion
//     mark, the record and draining record this process last wrote, the
//     addresses each backend last answered) and problems.go (each object's
//     last problem, to log it once). Created once for the process, shared
//     by every configuration, never rebuilt by a reload (DESIGN.md contract
//     12).
//
// Nothing here lives for one configuration, calls a cloud or writes to the
// API server: the router reads and writes; this package only says what
// the values are. It imports only pkg/router/backend (for backend names).
package svcstate
