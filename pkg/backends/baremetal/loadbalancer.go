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
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends/baremetal/bmconfig"
)

var (
	_ cloudprovider.LoadBalancer = (*LoadBalancer)(nil)
	_ backends.StatusAnnounced   = (*LoadBalancer)(nil)
)

// errNotSeeded is returned when the backend cannot know which addresses are
// taken.
var errNotSeeded = errors.New("the addresses already assigned are unknown: the Service informer was never set (SetInformers) and Seed was never called")

// maxCatchUps bounds how many times one Ensure re-assigns after finding its
// choice in a status the allocator had not yet seen.
const maxCatchUps = 16

// LoadBalancer allocates pool addresses to Services. It creates nothing
// outside the cluster: the address it returns in the Service's status is
// announced by a speaker such as MetalLB's or kube-vip. It is safe for
// concurrent use.
//
// Every pool address in any Service's status.loadBalancer.ingress is taken,
// whenever it appears: a Service informer handler keeps the allocator in
// step with the statuses, and before an assignment is returned the
// informer's index of status addresses is checked for a Service the handler
// has not reached yet.
type LoadBalancer struct {
	backend string

	// mu guards alloc.
	mu    sync.Mutex
	alloc *allocator

	// seeded is set once the allocator has seen every Service's status
	// (Seed), or an informer is set whose handler has seen them once
	// synced.
	seeded atomic.Bool

	// srcMu guards synced, byStatus and events, set by SetInformers and
	// Initialize.
	srcMu sync.Mutex
	// synced reports whether the handler has seen the informer's initial
	// list.
	synced cache.InformerSynced
	// byStatus finds the Services whose status shows an address; nil when
	// the informer had started before SetInformers and takes no index.
	byStatus cache.Indexer
	events   record.EventRecorder
	// client reads namespace labels (see namespaceLabels) and writes
	// kube-vip's annotation.
	client clientset.Interface
	// kubeVIP is the backend's announce: kube-vip.
	kubeVIP atomic.Bool
}

func newLoadBalancer(backend string, pools []*bmconfig.Pool) *LoadBalancer {
	lb := &LoadBalancer{backend: backend, alloc: newAllocator(pools)}
	lb.alloc.publish(backend)
	return lb
}

// statusIndex is the name of the informer index of Service status
// addresses; one per backend, as several may share the informer.
func (lb *LoadBalancer) statusIndex() string {
	return "multicloud-ccm.io/baremetal-status-ip/" + lb.backend
}

// SetInformers keeps the allocator in step with every Service's status:
// addresses a status shows are taken as they appear, released when no
// status shows them and the backend did not assign them, and a deleted
// Service's addresses are released. It must be called before the factory
// is started for the decision-time check; later, only the handler works.
// Called again (a backend reconfigured by a reload shares its load
// balancer), it does nothing.
func (lb *LoadBalancer) SetInformers(factory informers.SharedInformerFactory) {
	lb.srcMu.Lock()
	following := lb.synced != nil
	lb.srcMu.Unlock()
	if following {
		return // a reconfigured backend sharing this load balancer.
	}
	inf := factory.Core().V1().Services().Informer()
	var idx cache.Indexer
	if err := inf.AddIndexers(cache.Indexers{lb.statusIndex(): indexStatusIPs}); err != nil {
		klog.Background().WithValues("backend", lb.backend).Error(err, "Service statuses are followed by the event handler only")
	} else {
		idx = inf.GetIndexer()
	}
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    lb.onChange,
		UpdateFunc: func(_, obj any) { lb.onChange(obj) },
		DeleteFunc: lb.onDelete,
	})
	if err != nil {
		klog.Background().WithValues("backend", lb.backend).Error(err, "Cannot follow Service statuses; load balancers will fail")
		return
	}
	lb.srcMu.Lock()
	defer lb.srcMu.Unlock()
	lb.synced, lb.byStatus = reg.HasSynced, idx
}

// indexStatusIPs indexes a Service by the addresses in its status and those
// it requests.
func indexStatusIPs(obj any) ([]string, error) {
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return nil, nil
	}
	ips := append(statusIPs(svc), requestedAnywhere(svc)...)
	out := make([]string, 0, len(ips))
	for _, ip := range ips {
		if s := ip.String(); !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out, nil
}

// Annotations through which other allocators' Services request addresses.
// The backend never reads them as requests of its own; it only keeps the
// addresses they name out of automatic allocation.
const (
	kubeVIPLoadBalancerIPs       = "kube-vip.io/loadbalancerIPs"
	metalLBLoadBalancerIPs       = "metallb.io/loadBalancerIPs"
	metalLBLegacyLoadBalancerIPs = "metallb.universe.tf/loadBalancerIPs"
)

// requestedAnywhere returns the addresses a Service requests in any way an
// allocator reads: annotation multicloud-ccm.io/load-balancer-ips,
// spec.loadBalancerIP, and kube-vip's and MetalLB's annotations. What does
// not parse is skipped.
func requestedAnywhere(svc *corev1.Service) []netip.Addr {
	var out []netip.Addr
	for _, v := range []string{
		svc.Annotations[string(annotation.LoadBalancerIPs)], svc.Spec.LoadBalancerIP,
		svc.Annotations[kubeVIPLoadBalancerIPs], svc.Annotations[metalLBLoadBalancerIPs], svc.Annotations[metalLBLegacyLoadBalancerIPs],
	} {
		for _, f := range strings.Split(v, ",") {
			if ip, err := netip.ParseAddr(strings.TrimSpace(f)); err == nil {
				out = append(out, ip.Unmap())
			}
		}
	}
	return out
}

// Seed records the addresses in these Services' statuses as taken, in place
// of the informer, for callers without one (tests, tools). The CCM follows
// the informer set by SetInformers.
func (lb *LoadBalancer) Seed(services []*corev1.Service) {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	for _, svc := range services {
		lb.observe(svc)
	}
	lb.seeded.Store(true)
}

// observe records what the Service's status shows and which addresses it
// requests. Only a Service of type LoadBalancer requests one, as every
// allocator reads it (MetalLB ignores other types): a ClusterIP Service
// that kept its annotation after a type change holds nothing back from
// auto-assignment, nor counts in addresses_in_use. What kube-vip announces
// for a LoadBalancer Service from the kube-vip.io/loadbalancerIPs value
// the backend wrote (kubeVIPAnnounced) is held as what its status shows:
// the router may have cleared the status of a refused Service
// (refusedShown) while only a release withdraws that value, and a new
// process learns the assignments from what the Services show (review
// probe TestProbeRefusedKubeVIPAddressAfterRestart). lb.mu must be held.
func (lb *LoadBalancer) observe(svc *corev1.Service) bool {
	shownIPs := statusIPs(svc)
	var want []netip.Addr
	if svc.Spec.Type == corev1.ServiceTypeLoadBalancer {
		want = requestedAnywhere(svc)
		shownIPs = append(shownIPs, lb.kubeVIPAnnounced(svc)...)
	}
	shown := lb.alloc.observe(serviceKey(svc), svc.UID, shownIPs, shareOf(svc, true), lb.recordedAlone(svc))
	requested := lb.alloc.reserve(serviceKey(svc), svc.UID, want)
	return shown || requested
}

// classedFinalizer is the cleanup finalizer the load-balancer controller
// keeps on the Services of its classes (lbcontroller.Finalizer).
const classedFinalizer = "multicloud-ccm.io/load-balancer-cleanup"

// recordedAlone reports whether every address the Service's status shows
// is one this backend assigned: a classless Service whose router record
// names this backend and no other. A Service with a class (another
// controller's may carry a record left from its time as ours) or still
// carrying the finalizer of our classes (turned classless behind our back,
// another CCM may have served it since) is not answered for.
func (lb *LoadBalancer) recordedAlone(svc *corev1.Service) bool {
	return svc.Spec.LoadBalancerClass == nil && !slices.Contains(svc.Finalizers, classedFinalizer) &&
		strings.TrimSpace(svc.Annotations[string(annotation.LoadBalancerBackends)]) == lb.backend
}

func (lb *LoadBalancer) onChange(obj any) {
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return
	}
	lb.mu.Lock()
	changed := lb.observe(svc)
	lb.mu.Unlock()
	if changed {
		klog.Background().WithValues("backend", lb.backend, "service", klog.KObj(svc)).V(4).Info("Followed a Service status", "addresses", statusIPs(svc))
	}
}

// ready makes sure the allocator knows every address already assigned:
// until the handler has seen the informer's initial list, it waits within
// ctx.
func (lb *LoadBalancer) ready(ctx context.Context) error {
	if lb.seeded.Load() {
		return nil
	}
	lb.srcMu.Lock()
	synced := lb.synced
	lb.srcMu.Unlock()
	if synced == nil {
		return errNotSeeded
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced) {
		return fmt.Errorf("waiting for the Service informer to sync: %w", context.Cause(ctx))
	}
	if !lb.seeded.Swap(true) {
		klog.FromContext(ctx).V(2).Info("Load-balancer addresses follow Service statuses", "holders", lb.holders())
	}
	return nil
}

func (lb *LoadBalancer) holders() int {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	return len(lb.alloc.services)
}

// onDelete releases what a deleted Service still held or requested (the
// service controller normally releases it through EnsureLoadBalancerDeleted
// first). A Service recreated under the same name keeps its new addresses:
// only a holder with the deleted object's UID is released.
func (lb *LoadBalancer) onDelete(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return
	}
	lb.mu.Lock()
	defer lb.mu.Unlock()
	lb.alloc.unreserve(serviceKey(svc), svc.UID)
	h := lb.alloc.holdingOf(serviceKey(svc))
	if h != nil && (h.uid == "" || h.uid == svc.UID) {
		lb.alloc.releaseAll(h.name)
		klog.Background().WithValues("backend", lb.backend, "service", h.name).V(2).Info("Released the addresses of a deleted Service")
	}
}

// catchUp looks the addresses just assigned to the Service up in the
// informer's index of statuses and observes every other Service showing one
// the allocator does not know it holds. It reports whether it observed any;
// the assignment must then be made again. lb.mu must be held.
func (lb *LoadBalancer) catchUp(name string, ips []netip.Addr) bool {
	lb.srcMu.Lock()
	idx := lb.byStatus
	lb.srcMu.Unlock()
	if idx == nil {
		return false
	}
	changed := false
	for _, ip := range ips {
		objs, err := idx.ByIndex(lb.statusIndex(), ip.String())
		if err != nil {
			continue
		}
		for _, obj := range objs {
			svc, ok := obj.(*corev1.Service)
			if ok && serviceKey(svc) != name && lb.observe(svc) {
				changed = true
			}
		}
	}
	return changed
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
	if len(h.addrs) == 0 {
		return statusOf(h.status), true, nil
	}
	return statusOf(h.addrs), true, nil
}

// GetLoadBalancerName returns the upstream default name; nothing outside the
// cluster carries it.
func (lb *LoadBalancer) GetLoadBalancerName(_ context.Context, _ string, service *corev1.Service) string {
	return cloudprovider.DefaultLoadBalancerName(service)
}

// IgnoresNodes says that the nodes handed to EnsureLoadBalancer and
// UpdateLoadBalancer are ignored (backends.NodeIndependent): node changes
// need no re-sync.
func (lb *LoadBalancer) IgnoresNodes() bool { return true }

// AnnouncedFromStatus says that the addresses are announced from the
// Service's status (backends.StatusAnnounced): MetalLB's speaker announces
// what status.loadBalancer.ingress shows, and the allocator takes every
// pool address a status shows, after a restart too. A drain off this
// backend therefore keeps the addresses in the status until it ends.
func (lb *LoadBalancer) AnnouncedFromStatus() bool { return true }

// EnsureLoadBalancer assigns the Service its addresses and returns them.
// Calling it again with nothing changed returns the same addresses. Nodes
// are ignored: the speaker announcing the addresses picks its nodes.
func (lb *LoadBalancer) EnsureLoadBalancer(ctx context.Context, _ string, service *corev1.Service, _ []*corev1.Node) (*corev1.LoadBalancerStatus, error) {
	req, err := newRequest(service, lb.kubeVIP.Load())
	if err != nil {
		lb.refused(ctx, service, err)
		return nil, lb.wrap("ensuring load balancer", service, err)
	}
	if err := lb.ready(ctx); err != nil {
		return nil, lb.wrap("ensuring load balancer", service, err)
	}
	if req.target.NamespaceLabels, err = lb.namespaceLabels(ctx, service.Namespace); err != nil {
		return nil, lb.wrap("ensuring load balancer", service, err)
	}
	ips, before, err := lb.assign(ctx, req)
	if err != nil {
		lb.refused(ctx, service, err)
		return nil, lb.wrap("ensuring load balancer", service, err)
	}
	if backends.DryRun(ctx) && !slices.Equal(before, ips) && !sameAddrs(statusIPs(service), ips) {
		dryRunAssigned(ctx, service, before, ips)
	}
	if !slices.Equal(before, ips) {
		klog.FromContext(ctx).V(2).Info("Assigned load-balancer addresses", "service", klog.KObj(service), "addresses", ips, "previous", before)
	}
	lb.reportReplaced(ctx, service, ips)
	if err := lb.announce(ctx, service, ips); err != nil {
		return nil, lb.wrap("ensuring load balancer", service, err)
	}
	return statusOf(ips), nil
}

// assign assigns the request its addresses, again while they turn out to be
// in a status the allocator had not seen. It returns the addresses and
// those assigned before. Under a dry run (backends.WithDryRun) it decides
// the same addresses and assigns nothing; its pools' cursors move on only
// when the dry run is a step of a plan (backends.WithCarryOn), as the
// switch's sync would move them.
func (lb *LoadBalancer) assign(ctx context.Context, req *request) (ips, before []netip.Addr, err error) {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	if h := lb.alloc.holdingOf(req.name); h != nil {
		before = slices.Clone(h.addrs)
	}
	decide := lb.alloc.assign
	switch {
	case backends.DryRun(ctx) && backends.CarriesOn(ctx):
		decide = lb.alloc.decide
	case backends.DryRun(ctx):
		decide = lb.alloc.dryDecide
	}
	for range maxCatchUps {
		ips, err = decide(req)
		if err != nil || !lb.catchUp(req.name, ips) {
			return ips, before, err
		}
	}
	return nil, before, fmt.Errorf("the addresses chosen kept turning up in other Services' statuses; retrying")
}

// refused releases, when err refuses the Service what it asks (a user
// error: a requested address in use or outside the pools, a pool
// exhausted or not allowed, a malformed annotation), the addresses
// assigned to it before. The Service holds no address it was refused
// for: the router takes the addresses a refused Service showed out of its
// status (pkg/router/lifecycle, refusedShown), as MetalLB clears the
// assignment and the status of a Service it cannot allocate for; kept
// assigned, an address would be withheld from every other Service and
// counted in addresses_in_use though no status shows it (chaos seeds
// 265027605 and 657511863: a sharer refused the address it requested
// kept the one it had). What its status still shows stays taken until
// the status no longer shows it, and what it requests stays reserved: no
// address is handed out while a Service shows it. What kube-vip still
// announces for it (the kube-vip.io/loadbalancerIPs value the backend
// wrote, which only a release withdraws) stays assigned too: reserved
// only, a Service requesting it would be given it, and kube-vip would
// announce it for both (review probe
// TestProbeRefusedKubeVIPAnnouncedAddressNotHandedOut). Other failures
// (the informer not synced, a namespace unreadable) keep the assignment:
// they pass. A dry run releases nothing.
func (lb *LoadBalancer) refused(ctx context.Context, service *corev1.Service, err error) {
	if _, user := backends.AsUserError(err); !user || backends.DryRun(ctx) {
		return
	}
	announced := lb.kubeVIPAnnounced(service)
	lb.mu.Lock()
	var dropped []netip.Addr
	if h := lb.alloc.holdingOf(serviceKey(service)); h != nil {
		dropped = slices.DeleteFunc(slices.Clone(h.addrs), func(ip netip.Addr) bool { return slices.Contains(announced, ip) })
	}
	lb.alloc.releaseAssigned(serviceKey(service), announced...)
	lb.mu.Unlock()
	if len(dropped) > 0 {
		klog.FromContext(ctx).V(2).Info("Dropped the load-balancer addresses assigned to a refused Service; those its status shows stay taken until it no longer does", "service", klog.KObj(service), "addresses", dropped)
	}
}

// UpdateLoadBalancer only validates the Service: node changes do not concern
// an address allocator.
func (lb *LoadBalancer) UpdateLoadBalancer(_ context.Context, _ string, service *corev1.Service, _ []*corev1.Node) error {
	if _, err := newRequest(service, lb.kubeVIP.Load()); err != nil {
		return lb.wrap("updating load balancer", service, err)
	}
	return nil
}

// EnsureLoadBalancerDeleted releases the addresses assigned to the Service.
// It is idempotent. Those its status still shows (as the informer last saw
// it) stay taken until the status no longer shows them or the Service is
// deleted: no Service ever shows an address handed out again. Without an
// informer (Seed), nothing would report the status changing, so everything
// is released.
func (lb *LoadBalancer) EnsureLoadBalancerDeleted(ctx context.Context, _ string, service *corev1.Service) error {
	if err := lb.ready(ctx); err != nil {
		return lb.wrap("deleting load balancer", service, err)
	}
	lb.srcMu.Lock()
	following := lb.synced != nil
	lb.srcMu.Unlock()
	if err := lb.withdraw(ctx, service); err != nil {
		return lb.wrap("deleting load balancer", service, err)
	}
	if backends.DryRun(ctx) {
		lb.dryRunRelease(ctx, service)
		return nil
	}
	lb.mu.Lock()
	var released bool
	if following {
		released = lb.alloc.releaseAssigned(serviceKey(service))
	} else {
		released = lb.alloc.releaseAll(serviceKey(service))
	}
	lb.mu.Unlock()
	if released {
		klog.FromContext(ctx).V(2).Info("Released load-balancer addresses", "service", klog.KObj(service))
	}
	return nil
}

// dryRunAssigned records, under a dry run, the addresses an Ensure would
// assign: a replacement when the Service has other addresses (assigned or
// shown in its status), a create when it has none.
func dryRunAssigned(ctx context.Context, service *corev1.Service, before, ips []netip.Addr) {
	had := statusIPs(service)
	if len(had) == 0 {
		had = before
	}
	kind := backends.IntentCreate
	if len(had) > 0 {
		kind = backends.IntentReplace
	}
	backends.RecordIntentOf(ctx, kind, "assign addresses", fmt.Sprintf("addresses %v assigned (the Service has %v)", ips, had))
}

// dryRunRelease records, under a dry run, the release of what the
// Service holds.
func (lb *LoadBalancer) dryRunRelease(ctx context.Context, service *corev1.Service) {
	lb.mu.Lock()
	h := lb.alloc.holdingOf(serviceKey(service))
	var held []netip.Addr
	if h != nil {
		held = h.all()
	}
	lb.mu.Unlock()
	if len(held) > 0 {
		backends.RecordIntentOf(ctx, backends.IntentDelete, "release addresses", fmt.Sprintf("addresses %v released", held))
	}
}

func (lb *LoadBalancer) wrap(op string, service *corev1.Service, err error) error {
	return fmt.Errorf("%s for service %s: %w", op, serviceKey(service), err)
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

// newRequest reads what a Service asks for; kubeVIP is the backend's
// announce: kube-vip, under which a kube-vip.io/loadbalancerIPs value the
// user wrote is a request too. Every problem is a user error naming the
// annotation or field.
func newRequest(svc *corev1.Service, kubeVIP bool) (*request, error) {
	requested, err := requestedIPs(svc, kubeVIP)
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
		target:    bmconfig.Target{Namespace: svc.Namespace, Labels: svc.Labels},
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
// annotation, else (kubeVIP) the user's kube-vip.io/loadbalancerIPs, else
// spec.loadBalancerIP. Under kubeVIP the first two must agree: kube-vip
// announces its own annotation whatever ours says.
func requestedIPs(svc *corev1.Service, kubeVIP bool) ([]netip.Addr, error) {
	vip, hasVIP, err := kubeVIPRequest(svc, kubeVIP)
	if err != nil {
		return nil, err
	}
	if v, ok := svc.Annotations[string(annotation.LoadBalancerIPs)]; ok {
		ips, err := annotation.ParseLoadBalancerIPs(v)
		if err == nil && hasVIP && !sameAddrs(ips, vip) {
			return nil, errKubeVIPContradicts(ips, vip)
		}
		return ips, err
	}
	if hasVIP {
		return vip, nil // kube-vip's annotation wins over spec.loadBalancerIP, as kube-vip reads them.
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
	v, ok := svc.Annotations[string(annotation.AllowSharedIP)]
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
