// Package annotation holds the Service annotations and Node labels that every
// backend shares. Backend-specific annotations live in their backend's
// package. The names are part of the user-facing API and never change.
package annotation

const (
	// LoadBalancerBackend (Service annotation, string, default: the config's
	// loadBalancer.defaultBackend) names the backend that provides the
	// Service's load balancer. Changing it moves the load balancer: it is
	// created in the new backend and deleted from the old one.
	LoadBalancerBackend Name = "multicloud-ccm.io/load-balancer-backend"

	// NodeBackend (Node label, string, default: none). Set by the operator
	// through kubelet --node-labels, it tells the router which backend owns a
	// node that has no providerID yet. The router sets it on every node it
	// initialises, to the backend that initialised it.
	NodeBackend Name = "multicloud-ccm.io/backend"

	// LoadBalancerIPs (Service annotation, comma-separated IP addresses,
	// default: none) requests specific addresses for the Service's load
	// balancer, one per IP family at most. It takes precedence over the
	// deprecated spec.loadBalancerIP. Backends that cannot honour a request
	// report an error rather than hand out another address.
	LoadBalancerIPs Name = "multicloud-ccm.io/load-balancer-ips"

	// LoadBalancerBackends (Service annotation, comma-separated backend
	// names, written by the router, default: none) records every backend that
	// may hold a load balancer for the Service. The router adds a backend
	// before its first mutating call there and removes it only after that
	// backend's delete succeeded, so it knows across restarts which clouds to
	// ask and which to leave alone when one is down. Do not edit it by hand.
	LoadBalancerBackends Name = "multicloud-ccm.io/load-balancer-backends"

	// AllowSharedIP (Service annotation, string key, default: none). Services
	// carrying the same key may share a load-balancer address when none of
	// their ports clash (same port and protocol).
	AllowSharedIP Name = "multicloud-ccm.io/allow-shared-ip"
)
