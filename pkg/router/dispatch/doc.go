// Package dispatch sends the node calls of one configuration (InstancesV2:
// InstanceExists, InstanceShutdown, InstanceMetadata; Routes) to the
// backend that owns the node: by providerID scheme, by the
// multicloud-ccm.io/backend label, by the config's node rules, or by
// asking every candidate backend at once (resolve.go). It also knows
// which platforms (KEP-5778) this configuration serves and leaves other
// CCMs' nodes alone (platform.go).
//
// Lifetime: a Nodes lives for one configuration; the router's Router
// embeds it, and a reload builds a new one. What it keeps across calls
// (the backend a listed route came from, node problems logged once) is
// either this configuration's (routeOwner) or the process's
// (svcstate.States). Nothing here is kept in the API server except the
// platform label it writes on a node it initialises. It imports only
// pkg/router/backend and pkg/router/svcstate, never the router.
package dispatch
