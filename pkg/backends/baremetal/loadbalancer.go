package baremetal

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

var _ cloudprovider.LoadBalancer = (*LoadBalancer)(nil)

// errNotSeeded is returned when the backend cannot know which addresses are
// taken.
var errNotSeeded = errors.New("the addresses already assigned are unknown: the Service informer was never set (SetInformers) and Seed was never called")

// LoadBalancer allocates pool addresses to Services. It creates nothing
// outside the cluster: the address it returns in the Service's status is
// announced by a speaker such as MetalLB's or kube-vip. It is safe for
// concurrent use.
type LoadBalancer struct {
	backend string

	// mu guards alloc.
	mu    sync.Mutex
	alloc *allocator

	// seedMu serialises seeding; seeded is set once the allocator knows
	// every address in the Services' statuses.
	seedMu sync.Mutex
	seeded atomic.Bool

	// srcMu guards services and synced, set by SetInformers.
	srcMu    sync.Mutex
	services corelisters.ServiceLister
	synced   cache.InformerSynced
}

func newLoadBalancer(backend string, pools []*pool) *LoadBalancer {
	return &LoadBalancer{backend: backend, alloc: newAllocator(pools)}
}

// SetInformers registers the Service informer the load balancer reads the
// assigned addresses from, and releases the addresses of Services deleted
// behind the service controller's back.
func (lb *LoadBalancer) SetInformers(factory informers.SharedInformerFactory) {
	inf := factory.Core().V1().Services()
	_, _ = inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: lb.onDelete})
	lb.srcMu.Lock()
	defer lb.srcMu.Unlock()
	lb.services = inf.Lister()
	lb.synced = inf.Informer().HasSynced
}

// Seed records the addresses in these Services' statuses as taken, in place
// of the informer, for callers without one (tests, tools). The CCM seeds
// from the informer set by SetInformers.
func (lb *LoadBalancer) Seed(services []*corev1.Service) {
	lb.seedMu.Lock()
	defer lb.seedMu.Unlock()
	lb.seedFrom(services)
}

func (lb *LoadBalancer) seedFrom(services []*corev1.Service) {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	for _, svc := range services {
		ips := statusIPs(svc)
		if len(ips) > 0 {
			lb.alloc.seed(serviceKey(svc), svc.UID, ips, shareOf(svc, true))
		}
	}
	lb.seeded.Store(true)
}

// ready makes sure the allocator knows every address already assigned:
// the first call waits, within ctx, for the Service informer to sync and
// seeds the allocator from all Services' statuses.
func (lb *LoadBalancer) ready(ctx context.Context) error {
	if lb.seeded.Load() {
		return nil
	}
	lb.seedMu.Lock()
	defer lb.seedMu.Unlock()
	if lb.seeded.Load() {
		return nil
	}
	lb.srcMu.Lock()
	lister, synced := lb.services, lb.synced
	lb.srcMu.Unlock()
	if lister == nil {
		return errNotSeeded
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced) {
		return fmt.Errorf("waiting for the Service informer to sync: %w", context.Cause(ctx))
	}
	svcs, err := lister.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("listing Services: %w", err)
	}
	lb.seedFrom(svcs)
	klog.FromContext(ctx).WithValues("backend", lb.backend).V(2).Info("Seeded load-balancer addresses from Service statuses", "services", len(svcs), "holders", lb.holders())
	return nil
}

func (lb *LoadBalancer) holders() int {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	return len(lb.alloc.services)
}

// onDelete releases what a deleted Service still held (the service
// controller normally releases it through EnsureLoadBalancerDeleted first).
// A Service recreated under the same name keeps its new addresses: only a
// holder with the deleted object's UID is released.
func (lb *LoadBalancer) onDelete(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	svc, ok := obj.(*corev1.Service)
	if !ok || !lb.seeded.Load() {
		return
	}
	lb.mu.Lock()
	defer lb.mu.Unlock()
	h := lb.alloc.holdingOf(serviceKey(svc))
	if h != nil && (h.uid == "" || h.uid == svc.UID) {
		lb.alloc.releaseAll(h.name)
		klog.Background().WithValues("backend", lb.backend, "service", h.name).V(2).Info("Released the addresses of a deleted Service")
	}
}

// GetLoadBalancer reports the Service's addresses if this backend holds any.
func (lb *LoadBalancer) GetLoadBalancer(ctx context.Context, _ string, service *corev1.Service) (*corev1.LoadBalancerStatus, bool, error) {
	if err := lb.ready(ctx); err != nil {
		return nil, false, lb.wrap("getting load balancer", service, err)
	}
	lb.mu.Lock()
	defer lb.mu.Unlock()
	h := lb.alloc.holdingOf(serviceKey(service))
	if h == nil {
		return nil, false, nil
	}
	return statusOf(h.addrs), true, nil
}

// GetLoadBalancerName returns the upstream default name; nothing outside the
// cluster carries it.
func (lb *LoadBalancer) GetLoadBalancerName(_ context.Context, _ string, service *corev1.Service) string {
	return cloudprovider.DefaultLoadBalancerName(service)
}

// EnsureLoadBalancer assigns the Service its addresses and returns them.
// Calling it again with nothing changed returns the same addresses. Nodes
// are ignored: the speaker announcing the addresses picks its nodes.
func (lb *LoadBalancer) EnsureLoadBalancer(ctx context.Context, _ string, service *corev1.Service, _ []*corev1.Node) (*corev1.LoadBalancerStatus, error) {
	req, err := newRequest(service)
	if err != nil {
		return nil, lb.wrap("ensuring load balancer", service, err)
	}
	if err := lb.ready(ctx); err != nil {
		return nil, lb.wrap("ensuring load balancer", service, err)
	}
	lb.mu.Lock()
	var before []netip.Addr
	if h := lb.alloc.holdingOf(req.name); h != nil {
		before = slices.Clone(h.addrs)
	}
	ips, err := lb.alloc.assign(req)
	lb.mu.Unlock()
	if err != nil {
		return nil, lb.wrap("ensuring load balancer", service, err)
	}
	if !slices.Equal(before, ips) {
		klog.FromContext(ctx).WithValues("backend", lb.backend, "service", req.name).V(2).Info("Assigned load-balancer addresses", "addresses", ips, "previous", before)
	}
	return statusOf(ips), nil
}

// UpdateLoadBalancer only validates the Service: node changes do not concern
// an address allocator.
func (lb *LoadBalancer) UpdateLoadBalancer(_ context.Context, _ string, service *corev1.Service, _ []*corev1.Node) error {
	if _, err := newRequest(service); err != nil {
		return lb.wrap("updating load balancer", service, err)
	}
	return nil
}

// EnsureLoadBalancerDeleted releases the Service's addresses. It is
// idempotent.
func (lb *LoadBalancer) EnsureLoadBalancerDeleted(ctx context.Context, _ string, service *corev1.Service) error {
	if err := lb.ready(ctx); err != nil {
		return lb.wrap("deleting load balancer", service, err)
	}
	lb.mu.Lock()
	released := lb.alloc.releaseAll(serviceKey(service))
	lb.mu.Unlock()
	if released {
		klog.FromContext(ctx).WithValues("backend", lb.backend, "service", serviceKey(service)).V(2).Info("Released load-balancer addresses")
	}
	return nil
}

func (lb *LoadBalancer) wrap(op string, service *corev1.Service, err error) error {
	return fmt.Errorf("baremetal backend %q: %s for service %s: %w", lb.backend, op, serviceKey(service), err)
}

func serviceKey(svc *corev1.Service) string { return svc.Namespace + "/" + svc.Name }

// statusOf turns addresses into a load-balancer status.
func statusOf(ips []netip.Addr) *corev1.LoadBalancerStatus {
	st := &corev1.LoadBalancerStatus{}
	for _, ip := range ips {
		st.Ingress = append(st.Ingress, corev1.LoadBalancerIngress{IP: ip.String(), IPMode: ptr.To(corev1.LoadBalancerIPModeVIP)})
	}
	return st
}

// statusIPs returns the valid addresses in a Service's status.
func statusIPs(svc *corev1.Service) []netip.Addr {
	var out []netip.Addr
	for _, ing := range svc.Status.LoadBalancer.Ingress {
		if ip, err := netip.ParseAddr(ing.IP); err == nil {
			out = append(out, ip.Unmap())
		}
	}
	return out
}

// newRequest reads what a Service asks for. Every problem is a user error
// naming the annotation or field.
func newRequest(svc *corev1.Service) (*request, error) {
	requested, err := requestedIPs(svc)
	if err != nil {
		return nil, backends.NewUserError(ReasonInvalidLoadBalancerIPs, err)
	}
	if _, err := sharingKey(svc); err != nil {
		return nil, backends.NewUserError(ReasonInvalidAllowSharedIP, err)
	}
	req := &request{
		name:      serviceKey(svc),
		uid:       svc.UID,
		namespace: svc.Namespace,
		share:     shareOf(svc, false),
		requested: map[corev1.IPFamily]netip.Addr{},
	}
	if v, ok := svc.Annotations[AddressPoolAnnotation]; ok {
		req.poolName = strings.TrimSpace(v)
		if req.poolName == "" {
			return nil, backends.NewUserError(ReasonUnknownAddressPool, fmt.Errorf("annotation %s is empty: name an address pool or remove the annotation", AddressPoolAnnotation))
		}
	}
	req.families, req.requireAll = familiesOf(svc, requested)
	for _, ip := range requested {
		if !slices.Contains(req.families, familyOf(ip)) {
			return nil, backends.NewUserError(ReasonInvalidLoadBalancerIPs, fmt.Errorf("requested address %s is %s, but the Service's IP families are %v; request addresses of its families or change spec.ipFamilyPolicy", ip, familyOf(ip), req.families))
		}
		req.requested[familyOf(ip)] = ip
	}
	return req, nil
}

// requestedIPs reads the requested addresses: the LoadBalancerIPs
// annotation, else spec.loadBalancerIP.
func requestedIPs(svc *corev1.Service) ([]netip.Addr, error) {
	if v, ok := svc.Annotations[annotation.LoadBalancerIPs]; ok {
		return annotation.ParseLoadBalancerIPs(v)
	}
	if svc.Spec.LoadBalancerIP == "" {
		return nil, nil
	}
	ips, err := annotation.ParseLoadBalancerIPs(svc.Spec.LoadBalancerIP)
	if err != nil || len(ips) != 1 {
		return nil, fmt.Errorf("spec.loadBalancerIP %q is not one usable IP address; fix it, or clear it and use annotation %s", svc.Spec.LoadBalancerIP, annotation.LoadBalancerIPs)
	}
	return ips, nil
}

// sharingKey reads the AllowSharedIP annotation ("" when absent).
func sharingKey(svc *corev1.Service) (string, error) {
	v, ok := svc.Annotations[annotation.AllowSharedIP]
	if !ok {
		return "", nil
	}
	return annotation.ParseAllowSharedIP(v)
}

// shareOf reads what decides sharing. lenient turns a malformed key into no
// key (seeding: an unreadable key shares nothing).
func shareOf(svc *corev1.Service, lenient bool) shareInfo {
	key, err := sharingKey(svc)
	if err != nil && lenient {
		key = ""
	}
	si := shareInfo{
		key:   key,
		local: svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal,
	}
	if si.local {
		si.selector = labels.SelectorFromSet(svc.Spec.Selector).String()
	}
	for _, p := range svc.Spec.Ports {
		proto := p.Protocol
		if proto == "" {
			proto = corev1.ProtocolTCP
		}
		pp := portProto{port: p.Port, protocol: proto}
		if !slices.Contains(si.ports, pp) {
			si.ports = append(si.ports, pp)
		}
	}
	return si
}

// familiesOf returns the IP families the Service wants addresses of, its
// primary family first, and whether every one is required. The families
// are spec.ipFamilies (else those of the requested addresses, else IPv4),
// cut to one for SingleStack and completed to two for RequireDualStack.
func familiesOf(svc *corev1.Service, requested []netip.Addr) ([]corev1.IPFamily, bool) {
	var fams []corev1.IPFamily
	add := func(f corev1.IPFamily) {
		if (f == corev1.IPv4Protocol || f == corev1.IPv6Protocol) && !slices.Contains(fams, f) {
			fams = append(fams, f)
		}
	}
	for _, f := range svc.Spec.IPFamilies {
		add(f)
	}
	if len(fams) == 0 {
		for _, ip := range requested {
			add(familyOf(ip))
		}
	}
	if len(fams) == 0 {
		add(corev1.IPv4Protocol)
	}
	policy := ptr.Deref(svc.Spec.IPFamilyPolicy, corev1.IPFamilyPolicySingleStack)
	switch policy {
	case corev1.IPFamilyPolicyRequireDualStack:
		add(corev1.IPv6Protocol)
		return fams, true
	case corev1.IPFamilyPolicyPreferDualStack:
		return fams, false
	}
	return fams[:1], true
}
