// Package annotation holds the Service annotations and Node labels that every
// backend shares. Backend-specific annotations live in their backend's
// package. The names are part of the user-facing API and never change.
package annotation

const (
	// LoadBalancerBackend (Service annotation, string, default: the config's
	// loadBalancer.defaultBackend) names the backend that provides the
	// Service's load balancer, or several, comma-separated ("metal,aws"):
	// each serves it and the status lists every backend's addresses in that
	// order. Changing it moves the load balancer make-before-break: it is
	// created in the new backend, and the old one's addresses leave the
	// status (bare metal's: DNS, see load-balancer-dns-target) before it is
	// deleted, after the drain period (multicloud-ccm.io/load-balancer-drain).
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
	// ask and which to leave alone when one is down. On a Service being
	// deleted it is left as it is once every delete succeeded: the Service
	// is going, and a write would only re-run the service controller's
	// sync. Do not edit it by hand.
	LoadBalancerBackends Name = "multicloud-ccm.io/load-balancer-backends"

	// LoadBalancerRecordClass (Service annotation, string, written by the
	// router, default: none) is the spec.loadBalancerClass the record
	// (multicloud-ccm.io/load-balancer-backends) was made for, written
	// with it when a backend is added to it and removed with it: empty
	// for a classless Service. It tells the load-balancer controller,
	// after a restart or a failover too, that a Service it served was
	// given another controller's class (through ClusterIP) and that what
	// it holds for it is to be released. A record without it was written
	// by an earlier version: the controller then compares with the copy
	// it last synced. Do not edit it by hand.
	LoadBalancerRecordClass Name = "multicloud-ccm.io/load-balancer-class"

	// AllowSharedIP (Service annotation, string key, default: none). Services
	// carrying the same key may share a load-balancer address when none of
	// their ports clash (same port and protocol).
	AllowSharedIP Name = "multicloud-ccm.io/allow-shared-ip"
)

const (
	// LoadBalancerServedBy (Service annotation, backend name, written by the
	// router, default: none) names the backend whose load balancer serves
	// the Service, whether chosen by multicloud-ccm.io/load-balancer-backend,
	// by a loadBalancer.classes entry or by the config's default. Set after
	// each successful EnsureLoadBalancer, removed when the Service no longer
	// has a load balancer from us. Read-only: edit load-balancer-backend to
	// move it.
	LoadBalancerServedBy Name = "multicloud-ccm.io/load-balancer-served-by"

	// LoadBalancerID (Service annotation, string, written by the router,
	// default: none) is the cloud's own ID of the Service's load balancer as
	// its backend reports it, the way cloud-provider-openstack writes
	// loadbalancer.openstack.org/load-balancer-id: the NLB's ARN (aws), the
	// Octavia load balancer's UUID (openstack). Absent when the backend has
	// no cloud object to name: a bare-metal load balancer is its addresses,
	// shown in the Service's status. Set and removed with
	// load-balancer-served-by. Read-only.
	LoadBalancerID Name = "multicloud-ccm.io/load-balancer-id"
)

const (
	// LoadBalancerDrain (Service annotation, duration such as 5m or 90s,
	// default: the config's loadBalancer.drainPeriod, itself 0) is how long
	// a load balancer the Service stops using (its backend removed from
	// multicloud-ccm.io/load-balancer-backend, or the single backend changed)
	// keeps serving after its addresses left the Service's status, before it
	// is deleted; a bare-metal one keeps its addresses in the status until
	// then and leaves DNS instead (load-balancer-dns-target). 0 deletes it at
	// once.
	LoadBalancerDrain Name = "multicloud-ccm.io/load-balancer-drain"

	// LoadBalancerDraining (Service annotation, comma-separated
	// backend=RFC 3339 time, written by the router, default: none) lists the
	// backends whose load balancer is draining and when each drain ends. It
	// is on the Service so that a restart or a new leader neither cuts a
	// drain short nor forgets it. Read-only.
	LoadBalancerDraining Name = "multicloud-ccm.io/load-balancer-draining"

	// LoadBalancerDNSTarget (Service annotation, comma-separated IP
	// addresses and DNS names, written by the router, default: none) is the
	// value the router wrote in external-dns's target annotation
	// (external-dns.alpha.kubernetes.io/target and
	// external-dns.kubernetes.io/target) while a load balancer announced
	// from the Service's status (bare metal) drains: its addresses stay in
	// the status until the drain ends, so the router points external-dns at
	// the serving backends' addresses alone. It marks the target annotation
	// as the router's, across restarts: the router removes it when the last
	// such drain ends, and never changes or removes a target annotation it
	// did not write (a user's value is left alone). Read-only.
	LoadBalancerDNSTarget Name = "multicloud-ccm.io/load-balancer-dns-target"
)
