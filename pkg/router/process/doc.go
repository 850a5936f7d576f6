// Package process is what the router keeps and runs for the whole
// process, across every configuration: Shared holds the per-Service and
// per-Node state (svcstate.States) and the workers acting on it, which
// start once the informers are set: the drain timer (drainqueue.go: a
// Service is queued for a sync, which deletes its drained load balancer,
// when its drain ends), the node-address re-sync (nodesync.go: load
// balancers re-targeted when a node's address changes; the full syncs the
// router runs itself under upstream's service controller) and the
// forgetting of deleted Services' state.
//
// Lifetime: created once (router.NewReloadable, or router.New for a
// router used alone), never rebuilt by a reload. The workers reach the
// configuration in use only through Configuration, which Current hands
// them for each Service they pick up, so this package imports nothing of
// the router (the Router passes its lifecycle.Balancer down as a
// Configuration). What the workers read of a Service's annotations is
// svcstate's; they write nothing to the API server themselves except
// through the Configuration.
package process
