package baremetal

import (
	"context"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// ReasonIPReplaced is the reason of the Warning event on a Service whose
// status showed an address in none of the backend's pools, which the
// backend replaced with one from a pool. It is stable.
const ReasonIPReplaced = "LoadBalancerIPReplaced"

// setRecorder sets where the load balancer records its events.
func (lb *LoadBalancer) setRecorder(r record.EventRecorder) {
	lb.srcMu.Lock()
	defer lb.srcMu.Unlock()
	lb.events = r
}

// outsidePools returns the addresses of the Service's status that lie in
// none of the pools and that the Service no longer gets.
func (lb *LoadBalancer) outsidePools(service *corev1.Service, got []netip.Addr) []netip.Addr {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	var out []netip.Addr
	for _, ip := range statusIPs(service) {
		if lb.alloc.poolCovering(ip) == nil && !slices.Contains(got, ip) {
			out = append(out, ip)
		}
	}
	return out
}

// reportReplaced tells, with a Warning event and a log line, that the
// Service's status showed addresses outside every pool (a pool shrunk by a
// config change, or the Service came from another backend) which the new
// assignment replaces. Such an address is never kept: the pools are the
// operator's word on which addresses this backend may use.
func (lb *LoadBalancer) reportReplaced(ctx context.Context, service *corev1.Service, got []netip.Addr) {
	old := lb.outsidePools(service, got)
	if len(old) == 0 {
		return
	}
	klog.FromContext(ctx).Info("Replaced load-balancer addresses outside every address pool", "service", klog.KObj(service), "previous", old, "addresses", got)
	lb.srcMu.Lock()
	r := lb.events
	lb.srcMu.Unlock()
	if r == nil || backends.DryRun(ctx) {
		return
	}
	r.Eventf(service, corev1.EventTypeWarning, ReasonIPReplaced,
		"Address %v in the Service's status is in none of the address pools of backend %q (a pool was changed, or the Service came from another backend); it is replaced by %v. To keep an address, add it back to a pool and request it with annotation multicloud-ccm.io/load-balancer-ips",
		old, lb.backend, got)
}
