package openstack

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/loadbalancers"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/floatingips"
	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// errNoNetwork is returned when a floating IP is needed but Neutron is not
// reachable through the catalog or endpoints.network.
var errNoNetwork = errors.New("floating IPs need Neutron: add it to the Keystone catalog or set endpoints.network")

// wantsFloatingIP reports whether the Service's load balancer gets one.
func wantsFloatingIP(o *lbOptions) bool { return !o.internal && o.floatingNetworkID != "" }

// listFloatingIPs lists floating IPs matching opts.
func listFloatingIPs(ctx context.Context, sc *serviceClients, opts floatingips.ListOpts) ([]floatingips.FloatingIP, error) {
	if sc.network == nil {
		return nil, errNoNetwork
	}
	pages, err := floatingips.List(sc.network, opts).AllPages(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing floating IPs: %w", err)
	}
	fips, err := floatingips.ExtractFloatingIPs(pages)
	if err != nil {
		return nil, fmt.Errorf("listing floating IPs: %w", err)
	}
	return fips, nil
}

// floatingIPs lists the floating IPs of a load balancer's port or with its
// name: from the ctx's repair pass when it holds the load balancer, else
// from Neutron.
func (l *LoadBalancer) floatingIPs(ctx context.Context, sc *serviceClients, lbID string, opts floatingips.ListOpts) ([]floatingips.FloatingIP, error) {
	if p := l.passFrom(ctx); p != nil && sc.network != nil && lbID != "" && p.holds(lbID) {
		return p.floatingIPs(opts), nil
	}
	return listFloatingIPs(ctx, sc, opts)
}

// currentAddress is the load balancer's floating IP when it should have one
// and has, else its VIP.
func (l *LoadBalancer) currentAddress(ctx context.Context, sc *serviceClients, lb *loadbalancers.LoadBalancer, o *lbOptions) (string, error) {
	if !wantsFloatingIP(o) {
		return lb.VipAddress, nil
	}
	fips, err := l.floatingIPs(ctx, sc, lb.ID, floatingips.ListOpts{PortID: lb.VipPortID})
	if err != nil {
		return "", err
	}
	if len(fips) == 0 {
		return "", nil
	}
	return fips[0].FloatingIP, nil
}

// ensureFloatingIP gives the VIP port a floating IP when the Service wants
// one (and releases one it no longer wants), returning the address to
// report. With nothing to change it makes no mutating call.
func (l *LoadBalancer) ensureFloatingIP(ctx context.Context, sc *serviceClients, svc *corev1.Service, lb *loadbalancers.LoadBalancer, o *lbOptions) (string, error) {
	if !wantsFloatingIP(o) {
		if sc.network == nil {
			return lb.VipAddress, nil
		}
		// The floating IP released is the address the Service shows: the
		// VIP replaces it.
		if err := l.releaseFloatingIPs(ctx, sc, svc, lb, o, backends.IntentReplace); err != nil {
			return "", err
		}
		return lb.VipAddress, nil // Released ones were ours; see release.
	}
	fips, err := l.floatingIPs(ctx, sc, lb.ID, floatingips.ListOpts{PortID: lb.VipPortID})
	if err != nil {
		return "", err
	}
	want := requestedFloatingIP(svc)
	if len(fips) > 0 && (want == "" || fips[0].FloatingIP == want) {
		return fips[0].FloatingIP, nil
	}
	if len(fips) > 0 {
		if backends.DryRun(ctx) {
			// The release as the switch makes it (a delete, or a
			// disassociation), then what the next call does with the
			// requested address (associates or allocates it).
			call, what := l.releaseCall(svc, &fips[0], o.keepFloatingIP)
			dryRun(ctx, backends.IntentReplace, call, what+" for the requested "+want)
			return l.attachFloatingIP(ctx, sc, svc, lb, o, want)
		}
		if err := l.release(ctx, sc, svc, lb.ID, &fips[0], o.keepFloatingIP); err != nil {
			return "", err
		}
		return "", l.retry("floating IP %s released for the requested %s", fips[0].FloatingIP, want)
	}
	return l.attachFloatingIP(ctx, sc, svc, lb, o, want)
}

// requestedFloatingIP is the floating IP the Service asks for: the
// requested address, for a dual-stack Service its IPv4 one (floating IPs
// are IPv4; load-balancer-ips then lists an address per family).
func requestedFloatingIP(svc *corev1.Service) string {
	if isDualStack(svc) {
		return requestedIPOf(svc, corev1.IPv4Protocol)
	}
	return requestedIP(svc)
}

// attachFloatingIP associates the requested floating IP, or the one the
// backend allocated for the load balancer when it was disassociated behind
// its back (the address stays the same), or allocates one.
func (l *LoadBalancer) attachFloatingIP(ctx context.Context, sc *serviceClients, svc *corev1.Service, lb *loadbalancers.LoadBalancer, o *lbOptions, want string) (string, error) {
	existing, err := l.existingFloatingIP(ctx, sc, svc, lb.ID, o, want)
	if err != nil {
		return "", err
	}
	if existing != nil && existing.PortID == "" && dryRun(ctx, backends.IntentChange, "PUT floating IP", "floating IP "+existing.FloatingIP+" associated") {
		return existing.FloatingIP, nil
	}
	if existing != nil {
		return l.associate(ctx, sc, svc, existing, lb)
	}
	if dryRun(ctx, backends.IntentChange, "POST floating IP", "floating IP "+want+" allocated on network "+o.floatingNetworkID) {
		return want, nil
	}
	opts := floatingips.CreateOpts{
		FloatingNetworkID: o.floatingNetworkID, SubnetID: o.floatingSubnet.id, FloatingIP: want, PortID: lb.VipPortID, Description: l.lbName(svc),
	}
	var fip *floatingips.FloatingIP
	if want == "" && o.floatingSubnet.matches() {
		fip, err = l.allocateFromMatching(ctx, sc, lb.ID, opts, o.floatingSubnet)
	} else {
		l.mutating(lb.ID)
		fip, err = floatingips.Create(ctx, sc.network, opts).Extract()
		err = floatingCreateError(err, o, opts.SubnetID)
	}
	if err != nil {
		return "", err
	}
	l.logger(ctx, svc).V(2).Info("Allocated floating IP", "loadBalancerID", lb.ID, "floatingIP", fip.FloatingIP)
	l.reportChange(ctx, lb.ID, "floating IP "+fip.FloatingIP+" allocated")
	return fip.FloatingIP, nil
}

// allocateFromMatching allocates the floating IP from the first subnet
// the spec matches that has a free address, trying them in Neutron's
// order as cloud-provider-openstack does.
func (l *LoadBalancer) allocateFromMatching(ctx context.Context, sc *serviceClients, lbID string, opts floatingips.CreateOpts, spec floatingSubnetSpec) (*floatingips.FloatingIP, error) {
	found, err := matchingSubnets(ctx, sc.network, opts.FloatingNetworkID, spec)
	if err != nil {
		return nil, err
	}
	if len(found) == 0 {
		return nil, backends.NewUserError(reasonFloatingSubnet, fmt.Errorf("no subnet of floating network %s matches %s: fix the pattern or tags (`openstack subnet list --network %s --long`)", opts.FloatingNetworkID, spec, opts.FloatingNetworkID))
	}
	var errs []error
	for _, sn := range found {
		opts.SubnetID = sn.ID
		l.mutating(lbID)
		fip, err := floatingips.Create(ctx, sc.network, opts).Extract()
		if err == nil {
			return fip, nil
		}
		if !isClientError(err) {
			return nil, fmt.Errorf("allocating a floating IP on subnet %s (%s): %w", sn.Name, sn.ID, err)
		}
		errs = append(errs, fmt.Errorf("subnet %s (%s): %w", sn.Name, sn.ID, err))
	}
	return nil, fmt.Errorf("no subnet matching %s on floating network %s could allocate a floating IP: %w", spec, opts.FloatingNetworkID, errors.Join(errs...))
}

// reasonFloatingSubnet is the event reason when no floating subnet matches.
const reasonFloatingSubnet = "FloatingSubnetNotFound"

// isClientError reports an OpenStack 4xx answer: this subnet cannot serve,
// another may.
func isClientError(err error) bool {
	var e gophercloud.ErrUnexpectedResponseCode
	return errors.As(err, &e) && e.Actual >= 400 && e.Actual < 500
}

// floatingCreateError wraps a failed floating IP allocation; Neutron
// refusing the network or subnet the Service's settings give (400, 404) is
// a user error naming them.
func floatingCreateError(err error, o *lbOptions, subnetID string) error {
	if err == nil {
		return nil
	}
	if subnetID != "" && (gophercloud.ResponseCodeIs(err, http.StatusBadRequest) || gophercloud.ResponseCodeIs(err, http.StatusNotFound)) {
		return backends.NewUserError(reasonFloatingSubnet, fmt.Errorf("neutron refused to allocate a floating IP on network %s from subnet %s, set by %s: %w; give a subnet of that network", o.floatingNetworkID, subnetID, o.floatingSubnet.source, err))
	}
	return fmt.Errorf("allocating a floating IP on network %s: %w", o.floatingNetworkID, err)
}

// existingFloatingIP returns the floating IP to associate instead of
// allocating one: the requested address when it exists, else one the
// backend allocated for the load balancer on its floating network and that
// is on no port; or nil.
func (l *LoadBalancer) existingFloatingIP(ctx context.Context, sc *serviceClients, svc *corev1.Service, lbID string, o *lbOptions, want string) (*floatingips.FloatingIP, error) {
	if want != "" {
		existing, err := listFloatingIPs(ctx, sc, floatingips.ListOpts{FloatingIP: want, FloatingNetworkID: o.floatingNetworkID})
		if err != nil || len(existing) == 0 {
			return nil, err
		}
		return &existing[0], nil
	}
	left, err := l.leftoverFloatingIPs(ctx, sc, svc, lbID)
	if err != nil {
		return nil, err
	}
	for i := range left {
		if left[i].PortID == "" && left[i].FloatingNetworkID == o.floatingNetworkID {
			return &left[i], nil
		}
	}
	return nil, nil
}

// associate puts a requested, pre-existing floating IP on the VIP port. Its
// description is left alone, so deleting the Service only disassociates it.
func (l *LoadBalancer) associate(ctx context.Context, sc *serviceClients, svc *corev1.Service, fip *floatingips.FloatingIP, lb *loadbalancers.LoadBalancer) (string, error) {
	portID := lb.VipPortID
	if fip.PortID != "" && fip.PortID != portID {
		return "", backends.NewUserError("FloatingIPInUse", fmt.Errorf("requested floating IP %s is in use by port %s: free it or request another address", fip.FloatingIP, fip.PortID))
	}
	l.mutating(lb.ID)
	if _, err := floatingips.Update(ctx, sc.network, fip.ID, floatingips.UpdateOpts{PortID: &portID}).Extract(); err != nil {
		return "", fmt.Errorf("associating floating IP %s: %w", fip.FloatingIP, err)
	}
	l.logger(ctx, svc).V(2).Info("Associated floating IP", "floatingIP", fip.FloatingIP)
	l.reportChange(ctx, lb.ID, "floating IP "+fip.FloatingIP+" associated")
	return fip.FloatingIP, nil
}

// releaseFloatingIPs releases the floating IPs on the VIP port and any left
// with this load balancer's name (from an interrupted create); a dry run
// lists the releases on the port as kind (a replacement when the load
// balancer stays: the Service's address goes).
func (l *LoadBalancer) releaseFloatingIPs(ctx context.Context, sc *serviceClients, svc *corev1.Service, lb *loadbalancers.LoadBalancer, o *lbOptions, kind backends.IntentKind) error {
	if sc.network == nil {
		if wantsFloatingIP(o) {
			return errNoNetwork
		}
		return nil
	}
	fips, err := l.floatingIPs(ctx, sc, lb.ID, floatingips.ListOpts{PortID: lb.VipPortID})
	if err != nil {
		return err
	}
	done := map[string]bool{}
	for i := range fips {
		if err := l.releaseAs(ctx, sc, svc, lb.ID, &fips[i], o.keepFloatingIP, kind); err != nil {
			return err
		}
		done[fips[i].ID] = true
	}
	return l.releaseLeftovers(ctx, sc, svc, lb.ID, o, done)
}

// leftoverFloatingIPs lists floating IPs still carrying the load balancer's
// name in their description; lbID is the load balancer's, if any.
func (l *LoadBalancer) leftoverFloatingIPs(ctx context.Context, sc *serviceClients, svc *corev1.Service, lbID string) ([]floatingips.FloatingIP, error) {
	if sc.network == nil {
		return nil, nil
	}
	return l.floatingIPs(ctx, sc, lbID, floatingips.ListOpts{Description: l.lbName(svc)})
}

// releaseLeftovers releases the floating IPs left with the load balancer's
// name but those of done (released already: a dry run, which releases
// nothing, would list them twice).
func (l *LoadBalancer) releaseLeftovers(ctx context.Context, sc *serviceClients, svc *corev1.Service, lbID string, o *lbOptions, done map[string]bool) error {
	left, err := l.leftoverFloatingIPs(ctx, sc, svc, lbID)
	if err != nil {
		return err
	}
	for i := range left {
		if done[left[i].ID] {
			continue
		}
		if err := l.release(ctx, sc, svc, lbID, &left[i], o.keepFloatingIP); err != nil {
			return err
		}
	}
	return nil
}

// occmFloatingIPDescription starts the description cloud-provider-openstack
// gives the floating IPs it allocates (it releases those on delete, and so
// does this backend once it adopted the load balancer).
func occmFloatingIPDescription(svc *corev1.Service) string {
	return fmt.Sprintf("Floating IP for Kubernetes external service %s/%s from cluster ", svc.Namespace, svc.Name)
}

// release gives back a floating IP: one the backend allocated (its
// description is the load balancer's name) is deleted unless kept; any other
// (a requested, pre-existing one) and a kept one are only disassociated.
// lbID is the load balancer it belongs to, if any.
func (l *LoadBalancer) release(ctx context.Context, sc *serviceClients, svc *corev1.Service, lbID string, fip *floatingips.FloatingIP, keep bool) error {
	return l.releaseAs(ctx, sc, svc, lbID, fip, keep, backends.IntentChange)
}

// releaseAs is release, listed by a dry run as kind.
func (l *LoadBalancer) releaseAs(ctx context.Context, sc *serviceClients, svc *corev1.Service, lbID string, fip *floatingips.FloatingIP, keep bool, kind backends.IntentKind) error {
	log := l.logger(ctx, svc).WithValues("floatingIP", fip.FloatingIP)
	if call, what := l.releaseCall(svc, fip, keep); dryRun(ctx, kind, call, what) {
		return nil
	}
	if lbID != "" {
		l.mutating(lbID)
	}
	if l.ownFloatingIP(svc, fip) && !keep {
		if err := ignoreNotFound(floatingips.Delete(ctx, sc.network, fip.ID).ExtractErr()); err != nil {
			return fmt.Errorf("releasing floating IP %s: %w", fip.FloatingIP, err)
		}
		log.V(2).Info("Released floating IP")
		l.reportChange(ctx, lbID, "floating IP "+fip.FloatingIP+" released")
		return nil
	}
	opts := floatingips.UpdateOpts{PortID: new(string)}
	if l.ownFloatingIP(svc, fip) {
		opts.Description = ptr("kept by multicloud-ccm after " + l.lbName(svc))
	}
	if _, err := floatingips.Update(ctx, sc.network, fip.ID, opts).Extract(); err != nil {
		return fmt.Errorf("disassociating floating IP %s: %w", fip.FloatingIP, err)
	}
	log.V(2).Info("Disassociated floating IP")
	l.reportChange(ctx, lbID, "floating IP "+fip.FloatingIP+" disassociated")
	return nil
}

// ownFloatingIP reports whether the backend (or OCCM before it) allocated
// the Service's floating IP: release deletes it unless kept. One the
// owner of a shared load balancer handed over to it when it left
// (sharedFIPDescription; only those of the load balancer's VIP are ever
// asked about) goes with the load balancer, whoever deletes it: its
// owner's delete too, when the others left before its own turn.
func (l *LoadBalancer) ownFloatingIP(svc *corev1.Service, fip *floatingips.FloatingIP) bool {
	return fip.Description == l.lbName(svc) || strings.HasPrefix(fip.Description, occmFloatingIPDescription(svc)) ||
		strings.HasPrefix(fip.Description, sharedFIPPrefix)
}

// releaseCall is the call release makes for fip, as a dry run lists it:
// the floating IP's delete when it is ours and not kept, else its
// disassociation (a PUT).
func (l *LoadBalancer) releaseCall(svc *corev1.Service, fip *floatingips.FloatingIP, keep bool) (call, what string) {
	if l.ownFloatingIP(svc, fip) && !keep {
		return "DELETE floating IP", "floating IP " + fip.FloatingIP + " released"
	}
	if l.ownFloatingIP(svc, fip) {
		return "PUT floating IP", "floating IP " + fip.FloatingIP + " disassociated and kept (keep-floatingip)"
	}
	return "PUT floating IP", "floating IP " + fip.FloatingIP + " disassociated (not allocated for the Service: left to its owner)"
}
