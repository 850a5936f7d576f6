package openstack

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/loadbalancers"
	corev1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/api"
	"k8s.io/klog/v2"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// Octavia provisioning statuses the backend acts on.
const (
	lbActive = "ACTIVE"
	lbError  = "ERROR"
)

// maxNameLength is Octavia's limit on names.
const maxNameLength = 255

// LoadBalancer provides Octavia load balancers. Each Ensure or Update call
// makes at most one change, then returns a RetryError while Octavia applies
// it: no worker ever blocks waiting for ACTIVE.
type LoadBalancer struct {
	name       string
	clusterID  string
	settings   *LoadBalancerSettings
	clients    func(ctx context.Context) (*serviceClients, error)
	retryDelay time.Duration

	// pageSize is the page size of a repair pass's bulk lists.
	pageSize int
	// passes are the repair passes under way.
	passes backends.Passes[*repairPass]
	// members are the pools' members as last read.
	members memberMemory
	// building holds the IDs of load balancers this process created and
	// has not yet converged: their changes are not drift.
	building sync.Map
	// lostWindow is how long a create whose answer was lost may still
	// land (0: lostCreateWindow; see lostCreates).
	lostWindow time.Duration
	// subnets caches the Neutron subnets a dual-stack VIP is chosen from.
	subnets subnetCache
	// events records the backend's own Warning events.
	events events
}

var (
	_ cloudprovider.LoadBalancer = (*LoadBalancer)(nil)
	_ backends.NodeTargeter      = (*LoadBalancer)(nil)
)

func newLoadBalancer(name, clusterID string, s *LoadBalancerSettings, clients func(context.Context) (*serviceClients, error)) *LoadBalancer {
	return &LoadBalancer{name: name, clusterID: clusterID, settings: s, clients: clients, retryDelay: 2 * time.Second, pageSize: defaultListPageSize}
}

// CanTarget is true for every node with an InternalIP: members may be any
// node the VIP network reaches, bare metal and other clouds' included.
func (l *LoadBalancer) CanTarget(_ *corev1.Service, node *corev1.Node) bool {
	return nodeAddress(node) != ""
}

// lbName is the load balancer's name: mccm_<cluster>_<namespace>_<name>.
func (l *LoadBalancer) lbName(svc *corev1.Service) string {
	n := fmt.Sprintf("mccm_%s_%s_%s", l.clusterID, svc.Namespace, svc.Name)
	if len(n) > maxNameLength {
		n = n[:maxNameLength]
	}
	return n
}

// tags mark a load balancer as this cluster's, for this Service.
func (l *LoadBalancer) tags(svc *corev1.Service) []string {
	return []string{"mccm-cluster=" + l.clusterID, "mccm-service=" + svc.Namespace + "/" + svc.Name}
}

// GetLoadBalancerName returns the Octavia name of the Service's load balancer.
func (l *LoadBalancer) GetLoadBalancerName(_ context.Context, _ string, svc *corev1.Service) string {
	return l.lbName(svc)
}

func (l *LoadBalancer) logger(ctx context.Context, svc *corev1.Service) klog.Logger {
	return klog.FromContext(ctx).WithValues("service", klog.KObj(svc))
}

func (l *LoadBalancer) wrap(op string, svc *corev1.Service, err error) error {
	if _, ok := backends.AsUserError(err); ok {
		return err
	}
	return fmt.Errorf("%s load balancer for %s/%s: %w", op, svc.Namespace, svc.Name, err)
}

func (l *LoadBalancer) retry(format string, args ...any) error {
	return api.NewRetryError(fmt.Sprintf(format, args...), l.retryDelay)
}

// find lists the Service's load balancers by tag, oldest first: from the
// ctx's repair pass when it holds them, else from Octavia.
func (l *LoadBalancer) find(ctx context.Context, sc *serviceClients, svc *corev1.Service) ([]loadbalancers.LoadBalancer, error) {
	if p := l.passFrom(ctx); p != nil {
		if found, ok := p.find(svc.Namespace + "/" + svc.Name); ok {
			return found, nil
		}
	}
	return l.list(ctx, sc, loadbalancers.ListOpts{Tags: l.tags(svc)})
}

func (l *LoadBalancer) list(ctx context.Context, sc *serviceClients, opts loadbalancers.ListOpts) ([]loadbalancers.LoadBalancer, error) {
	pages, err := loadbalancers.List(sc.loadBalancer, opts).AllPages(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing load balancers: %w", err)
	}
	found, err := loadbalancers.ExtractLoadBalancers(pages)
	if err != nil {
		return nil, fmt.Errorf("listing load balancers: %w", err)
	}
	sort.SliceStable(found, func(i, j int) bool { return found[i].CreatedAt.Before(found[j].CreatedAt) })
	return found, nil
}

// occmName is the name cloud-provider-openstack gives a Service's load
// balancer: kube_service_<cluster name>_<namespace>_<name>, cut at 255.
func occmName(clusterName string, svc *corev1.Service) string {
	n := fmt.Sprintf("kube_service_%s_%s_%s", clusterName, svc.Namespace, svc.Name)
	if len(n) > maxNameLength {
		n = n[:maxNameLength]
	}
	return n
}

// lookup finds the Service's load balancers: ours by tag; else the one
// its load-balancer-id annotation names, or the one cloud-provider-openstack
// made for it (by its name), which is then adopted. adopt is true when the
// load balancer found is the Service's own but still lacks our tags;
// shared when the annotation names another Service's load balancer, which
// the Service shares.
func (l *LoadBalancer) lookup(ctx context.Context, sc *serviceClients, clusterName string, svc *corev1.Service) (found []loadbalancers.LoadBalancer, adopt, shared bool, err error) {
	found, err = l.find(ctx, sc, svc)
	if err != nil || len(found) > 0 {
		if len(found) > 0 {
			l.createLanded(svc)
		}
		return found, false, false, err
	}
	if id, _ := AnnotationLoadBalancerID.Get(svc.Annotations); id != "" {
		lb, err := l.byID(ctx, sc, id)
		if err != nil || lb == nil {
			return nil, false, false, err
		}
		own := lb.Name == occmName(clusterName, svc) || lb.Name == l.lbName(svc)
		return []loadbalancers.LoadBalancer{*lb}, own, !own, nil
	}
	found, err = l.list(ctx, sc, loadbalancers.ListOpts{Name: occmName(clusterName, svc)})
	if err != nil || len(found) == 0 {
		return nil, false, false, err
	}
	if len(found) > 1 {
		return nil, false, false, fmt.Errorf("%d load balancers are named %s: delete all but one, or name the one to use in %s", len(found), found[0].Name, AnnotationLoadBalancerID)
	}
	return found, true, false, nil
}

// byID gets the load balancer a load-balancer-id annotation names; one
// that is gone is none.
func (l *LoadBalancer) byID(ctx context.Context, sc *serviceClients, id string) (*loadbalancers.LoadBalancer, error) {
	lb, err := loadbalancers.Get(ctx, sc.loadBalancer, id).Extract()
	if gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("getting load balancer %s: %w", id, err)
	}
	return lb, nil
}

// adoptLB tags a load balancer made by cloud-provider-openstack as ours,
// keeping its tags: from then on it is found like one we made.
func (l *LoadBalancer) adoptLB(ctx context.Context, sc *serviceClients, svc *corev1.Service, lb *loadbalancers.LoadBalancer) error {
	if strings.HasPrefix(lb.ProvisioningStatus, "PENDING_") {
		return l.retry("load balancer %s to adopt is %s", lb.ID, lb.ProvisioningStatus)
	}
	// In the load balancer's turn, on its tags as they are (Services of
	// cloud-provider-openstack's may share it, and leave meanwhile): see
	// retagShared.
	cur, unlock, err := l.inTurn(ctx, sc, lb.ID)
	if err != nil {
		return err
	}
	defer unlock()
	tags := rebaseTags(lb.Tags, append(slices.Clone(lb.Tags), l.tags(svc)...), cur.Tags)
	l.mutating(lb.ID)
	if _, err := loadbalancers.Update(ctx, sc.loadBalancer, lb.ID, loadbalancers.UpdateOpts{Tags: &tags}).Extract(); err != nil {
		return fmt.Errorf("tagging load balancer %s to adopt it: %w", lb.ID, err)
	}
	l.logger(ctx, svc).V(2).Info("Adopted load balancer", "loadBalancerID", lb.ID, "name", lb.Name)
	l.reportChange(ctx, lb.ID, "load balancer "+lb.Name+" adopted (tagged as this Service's)")
	return l.retry("load balancer %s adopted", lb.ID)
}

// GetLoadBalancer reports the Service's load balancer; exists is true while
// any part of it is left in OpenStack.
func (l *LoadBalancer) GetLoadBalancer(ctx context.Context, clusterName string, svc *corev1.Service) (*corev1.LoadBalancerStatus, bool, error) {
	sc, err := l.clients(ctx)
	if err != nil {
		return nil, false, l.wrap("getting", svc, err)
	}
	found, _, shared, err := l.lookup(ctx, sc, clusterName, svc)
	if err != nil {
		return nil, false, l.wrap("getting", svc, err)
	}
	if shared {
		return l.getShared(ctx, sc, svc, &found[0])
	}
	if len(found) == 0 {
		if !l.mayStillLand(svc).IsZero() {
			// A create whose answer was lost may still make it: upstream
			// must not skip the delete.
			return nil, true, nil
		}
		left, err := l.leftoverFloatingIPs(ctx, sc, svc, "")
		if err != nil {
			return nil, false, l.wrap("getting", svc, err)
		}
		return nil, len(left) > 0, nil
	}
	o := l.lenientOptions(ctx, svc)
	addr, err := l.currentAddress(ctx, sc, &found[0], o)
	if err != nil {
		return nil, true, l.wrap("getting", svc, err)
	}
	return status(serviceAddresses(svc, &found[0], addr), o), true, nil
}

// status is the Service's load-balancer status: the host name when the
// hostname annotation sets one, else the addresses (see serviceAddresses),
// with ipMode Proxy when the pools speak the PROXY protocol (in-cluster
// clients must then go through the load balancer too).
func status(addrs []string, o *lbOptions) *corev1.LoadBalancerStatus {
	if o.hostname != "" {
		return &corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{Hostname: o.hostname}}}
	}
	mode := corev1.LoadBalancerIPModeVIP
	if o.proxy != "" {
		mode = corev1.LoadBalancerIPModeProxy
	}
	st := &corev1.LoadBalancerStatus{}
	for _, a := range addrs {
		st.Ingress = append(st.Ingress, corev1.LoadBalancerIngress{IP: a, IPMode: ptr(mode)})
	}
	return st
}

// EnsureLoadBalancer creates or converges the Service's load balancer, one
// change per call, and returns its address once nothing is left to change.
func (l *LoadBalancer) EnsureLoadBalancer(ctx context.Context, clusterName string, svc *corev1.Service, nodes []*corev1.Node) (*corev1.LoadBalancerStatus, error) {
	st, err := l.ensure(ctx, clusterName, svc, nodes)
	if err != nil {
		return nil, l.wrap("ensuring", svc, err)
	}
	return st, nil
}

// UpdateLoadBalancer sets the pool members of the Service's load balancer
// to the nodes, one pool per call, and changes nothing else (see update).
func (l *LoadBalancer) UpdateLoadBalancer(ctx context.Context, clusterName string, svc *corev1.Service, nodes []*corev1.Node) error {
	if err := l.update(ctx, clusterName, svc, nodes); err != nil {
		return l.wrap("updating", svc, err)
	}
	return nil
}

// ensure creates or converges the Service's load balancer.
func (l *LoadBalancer) ensure(ctx context.Context, clusterName string, svc *corev1.Service, nodes []*corev1.Node) (*corev1.LoadBalancerStatus, error) {
	o, err := parseOptions(svc, l.settings)
	if err != nil {
		return nil, err
	}
	want, err := desiredListeners(svc, nodes, o)
	if err != nil {
		return nil, err
	}
	sc, err := l.clients(ctx)
	if err != nil {
		return nil, err
	}
	found, adopt, shared, err := l.lookup(ctx, sc, clusterName, svc)
	if err != nil {
		return nil, err
	}
	switch {
	case shared:
		return l.ensureShared(ctx, sc, clusterName, svc, &found[0], want, o)
	case adopt && !dryRun(ctx, backends.IntentAdopt, "PUT load balancer tags", "load balancer "+found[0].Name+" ("+found[0].ID+") adopted in place: tagged as this Service's"):
		return nil, l.adoptLB(ctx, sc, svc, &found[0])
	case len(found) == 0:
		// A Service whose load-balancer-id was removed while it shared
		// another Service's load balancer leaves it before it gets its own.
		if err := l.leaveOtherShares(ctx, sc, clusterName, svc, "", o); err != nil {
			return nil, err
		}
		if backends.DryRun(ctx) {
			return dryRunCreate(ctx, backends.IntentCreate, l.lbName(svc), want, o), nil
		}
		if until := l.pendingCreate(svc); !until.IsZero() {
			// Not a second create while the first may still land.
			return nil, l.waitLostCreate(svc, until)
		}
		return nil, l.create(ctx, sc, svc, o)
	}
	if len(found) > 1 {
		dup := &found[len(found)-1]
		if !dryRun(ctx, backends.IntentChange, "DELETE load balancer", "duplicate load balancer "+dup.ID+" deleted") {
			return nil, l.deleteOne(ctx, sc, svc, dup, o, "duplicate load balancer "+dup.ID+" deleted")
		}
	}
	lb := &found[0]
	if lb.ProvisioningStatus == lbError && dryRun(ctx, backends.IntentReplace, "DELETE load balancer", "load balancer "+lb.ID+" in ERROR deleted to be replaced") {
		return dryRunCreate(ctx, backends.IntentReplace, l.lbName(svc), want, o), nil
	}
	if err := l.checkReady(ctx, sc, svc, lb); err != nil {
		return nil, err
	}
	l.checkFamilies(ctx, svc, lb)
	if o.memberSubnetID == "" && (isDualStack(svc) || o.portID != "") {
		setMemberSubnet(want, lb.VipSubnetID)
	}
	if err := l.converge(ctx, sc, svc, lb, want, ownerListeners(lb)); err != nil {
		return nil, err
	}
	addr, err := l.ensureFloatingIP(ctx, sc, svc, lb, o)
	if err != nil {
		return nil, err
	}
	l.building.Delete(lb.ID)
	addrs := serviceAddresses(svc, lb, addr)
	reportServed(ctx, lb.ID, addrs)
	return status(addrs, o), nil
}

// setMemberSubnet puts the members on a subnet. Unless a member subnet is
// set, a dual-stack Service's members (of its primary family) are on the
// primary VIP's subnet, and a port-id Service's on its port's subnet (the
// VIP subnet Octavia took from the port), not on the configured VIP
// subnet, which is another family's or not the port's.
func setMemberSubnet(want []listenerSpec, subnet string) {
	for i := range want {
		for j := range want[i].members {
			want[i].members[j].subnetID = subnet
		}
	}
}

// reportServed reports, for the router to write on the Service, the load
// balancer's ID and address as cloud-provider-openstack writes them
// (loadbalancer.openstack.org/load-balancer-id and -address), the ID also
// as multicloud-ccm.io/load-balancer-id. The address is the primary one,
// the first of addrs.
func reportServed(ctx context.Context, id string, addrs []string) {
	addr := ""
	if len(addrs) > 0 {
		addr = addrs[0]
	}
	backends.ReportLoadBalancerID(ctx, id)
	backends.ReportServiceAnnotation(ctx, string(AnnotationLoadBalancerID), id)
	backends.ReportServiceAnnotation(ctx, string(AnnotationLoadBalancerAddress), addr)
}

// checkReady returns nil for an ACTIVE load balancer, replaces one in ERROR,
// and asks to retry for one still pending.
func (l *LoadBalancer) checkReady(ctx context.Context, sc *serviceClients, svc *corev1.Service, lb *loadbalancers.LoadBalancer) error {
	switch lb.ProvisioningStatus {
	case lbActive:
		return nil
	case lbError:
		l.logger(ctx, svc).V(2).Info("Replacing load balancer in ERROR", "loadBalancerID", lb.ID)
		l.mutating(lb.ID)
		if err := loadbalancers.Delete(ctx, sc.loadBalancer, lb.ID, loadbalancers.DeleteOpts{Cascade: true}).ExtractErr(); err != nil {
			return fmt.Errorf("deleting load balancer %s in ERROR: %w", lb.ID, err)
		}
		l.reportChange(ctx, lb.ID, "load balancer "+lb.ID+" in ERROR deleted to be replaced")
		return l.retry("load balancer %s was in ERROR and is being replaced", lb.ID)
	}
	return l.retry("load balancer %s is %s", lb.ID, lb.ProvisioningStatus)
}

// create makes the bare load balancer; listeners, pools, members and
// monitors follow one per call through converge. (A fully populated create
// is one call less per port, but Octavia 11's amphora flow can leave the
// children PENDING_CREATE under an ACTIVE load balancer, immutable for
// good; step by step every object is confirmed.)
func (l *LoadBalancer) create(ctx context.Context, sc *serviceClients, svc *corev1.Service, o *lbOptions) error {
	opts := loadbalancers.CreateOpts{
		Name: l.lbName(svc), Description: fmt.Sprintf("Kubernetes Service %s/%s of cluster %s", svc.Namespace, svc.Name, l.clusterID),
		VipSubnetID: o.vipSubnetID, VipNetworkID: o.vipNetworkID, Provider: l.settings.Provider,
		FlavorID: o.flavorID, AvailabilityZone: o.availabilityZone, Tags: l.tags(svc), VipAddress: internalVIP(svc, o),
	}
	if opts.VipSubnetID != "" {
		opts.VipNetworkID = ""
	}
	if o.portID != "" {
		opts.VipPortID, opts.VipSubnetID, opts.VipNetworkID = o.portID, "", ""
	}
	if isDualStack(svc) {
		if err := l.dualStackCreate(ctx, sc, svc, o, &opts); err != nil {
			return err
		}
	}
	lb, err := loadbalancers.Create(ctx, sc.loadBalancer, opts).Extract()
	if gophercloud.ResponseCodeIs(err, http.StatusBadRequest) || gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
		return backends.NewUserError(reasonOctaviaRefused, fmt.Errorf("octavia refused to create the load balancer, set by %s, %s, %s, %s or %s: %w; change or remove the annotation",
			AnnotationFlavorID, AnnotationAvailabilityZone, AnnotationPortID, AnnotationVIPSubnetID, AnnotationVIPNetworkID, err))
	}
	if err != nil {
		if answerLost(err) {
			l.createLost(svc)
		}
		return fmt.Errorf("creating load balancer: %w", err)
	}
	l.building.Store(lb.ID, true)
	l.logger(ctx, svc).V(2).Info("Created load balancer", "loadBalancerID", lb.ID)
	return l.retry("load balancer %s is being created", lb.ID)
}

// internalVIP is the requested address of an internal load balancer.
func internalVIP(svc *corev1.Service, o *lbOptions) string {
	if !o.internal {
		return ""
	}
	return requestedIP(svc)
}

// EnsureLoadBalancerDeleted removes the Service's load balancers and their
// floating IPs (disassociated instead when kept), asking to retry until
// nothing is left.
func (l *LoadBalancer) EnsureLoadBalancerDeleted(ctx context.Context, clusterName string, svc *corev1.Service) error {
	if err := l.ensureDeleted(ctx, clusterName, svc); err != nil {
		return l.wrap("deleting", svc, err)
	}
	return nil
}

func (l *LoadBalancer) ensureDeleted(ctx context.Context, clusterName string, svc *corev1.Service) error {
	o := l.lenientOptions(ctx, svc)
	sc, err := l.clients(ctx)
	if err != nil {
		return err
	}
	found, _, shared, err := l.lookup(ctx, sc, clusterName, svc)
	if err != nil {
		return err
	}
	if len(found) == 0 {
		// A sharing Service whose annotation was removed is found by tag.
		if found, err = l.list(ctx, sc, loadbalancers.ListOpts{Tags: []string{l.sharedTag(svc)}}); err != nil {
			return err
		}
		shared = len(found) > 0
	}
	switch {
	case shared:
		return l.leave(ctx, sc, svc, &found[0], l.sharerListeners(clusterName, svc), l.sharedTag(svc), o)
	case len(found) > 0 && sharedByOthers(&found[0]):
		return l.leaveAsOwner(ctx, sc, svc, &found[0], o)
	case len(found) > 0 && backends.DryRun(ctx):
		// As deleteOne: the floating IPs released (deleted, or only
		// disassociated when kept or not ours), then the load balancer.
		if err := l.releaseFloatingIPs(ctx, sc, svc, &found[0], o, backends.IntentChange); err != nil {
			return err
		}
		dryRun(ctx, backends.IntentDelete, "DELETE load balancer (cascade)", "load balancer "+found[0].ID+" deleted with its listeners and pools")
		return nil
	case len(found) > 0:
		return l.deleteOne(ctx, sc, svc, &found[0], o, "")
	}
	if until := l.mayStillLand(svc); !until.IsZero() && !backends.DryRun(ctx) {
		return l.waitLostCreate(svc, until)
	}
	return l.releaseLeftovers(ctx, sc, svc, "", o, nil)
}

// lenientOptions are the options GetLoadBalancer and a delete need. A bad
// annotation must not block the delete (the load balancer would leak): bad
// values fall back to the defaults, except that a floating IP is then kept,
// never released on a guess.
func (l *LoadBalancer) lenientOptions(ctx context.Context, svc *corev1.Service) *lbOptions {
	o, err := parseOptions(svc, l.settings)
	if err == nil {
		return o
	}
	l.logger(ctx, svc).Info("Deleting with default options: the Service has a bad annotation", "err", err)
	bare := svc.DeepCopy()
	bare.Annotations = nil
	o, _ = parseOptions(bare, l.settings)
	if v, set := AnnotationKeepFloatingIP.Get(svc.Annotations); set {
		keep, perr := strconv.ParseBool(v)
		o.keepFloatingIP = keep || perr != nil
	}
	if v, set := AnnotationInternal.Get(svc.Annotations); set {
		internal, perr := strconv.ParseBool(v)
		o.internal = internal && perr == nil
	}
	if id, _ := AnnotationFloatingNetworkID.Get(svc.Annotations); uuidRE.MatchString(id) {
		o.floatingNetworkID = id
	}
	return o
}

// deleteOne releases a load balancer's floating IP, then deletes the load
// balancer with everything in it; report, when set, is the change to
// report once the delete is accepted.
func (l *LoadBalancer) deleteOne(ctx context.Context, sc *serviceClients, svc *corev1.Service, lb *loadbalancers.LoadBalancer, o *lbOptions, report string) error {
	if strings.HasPrefix(lb.ProvisioningStatus, "PENDING_") {
		return l.retry("load balancer %s is %s", lb.ID, lb.ProvisioningStatus)
	}
	if err := l.releaseFloatingIPs(ctx, sc, svc, lb, o, backends.IntentChange); err != nil {
		return err
	}
	l.mutating(lb.ID)
	l.building.Delete(lb.ID)
	err := loadbalancers.Delete(ctx, sc.loadBalancer, lb.ID, loadbalancers.DeleteOpts{Cascade: true}).ExtractErr()
	if gophercloud.ResponseCodeIs(err, http.StatusConflict) {
		return l.retry("load balancer %s is busy: %v", lb.ID, err)
	}
	if err != nil && !gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
		return fmt.Errorf("deleting load balancer %s: %w", lb.ID, err)
	}
	l.logger(ctx, svc).V(2).Info("Deleting load balancer", "loadBalancerID", lb.ID)
	if report != "" && err == nil {
		backends.ReportChange(ctx, report)
	}
	return l.retry("load balancer %s is being deleted", lb.ID)
}

// requestedIP is the address asked for by annotation or spec.loadBalancerIP.
func requestedIP(svc *corev1.Service) string {
	if v := svc.Annotations[string(annotation.LoadBalancerIPs)]; v != "" {
		return strings.TrimSpace(strings.Split(v, ",")[0])
	}
	return svc.Spec.LoadBalancerIP
}
