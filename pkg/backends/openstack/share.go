package openstack

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/listeners"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/loadbalancers"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/floatingips"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/cloud-provider/api"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// Sharing: a Service whose load-balancer-id annotation names another
// Service's load balancer (as cloud-provider-openstack allows) adds its own
// listeners to it. The load balancer then carries the Service's
// mccm-shared=<cluster>/<namespace>/<name> tag, and so do its listeners;
// each Service converges only its own listeners. The owner (the Service
// whose mccm-service tag the load balancer carries) manages the floating
// IP; a sharing Service reports the address the load balancer has.

// reasonShared is the event reason when a Service cannot share the load
// balancer it names.
const reasonShared = "LoadBalancerNotShareable"

// sharedTagPrefix starts the tag of a Service sharing a load balancer.
const sharedTagPrefix = "mccm-shared="

// occmTagPrefix starts the tags cloud-provider-openstack puts on the load
// balancers and listeners of the Services it serves.
const occmTagPrefix = "kube_service_"

// sharedTag marks a load balancer and listeners as a sharing Service's.
func (l *LoadBalancer) sharedTag(svc *corev1.Service) string {
	return sharedTagPrefix + l.clusterID + "/" + svc.Namespace + "/" + svc.Name
}

// ownerTag is the tag of the Service owning a load balancer.
func ownerTag(svc *corev1.Service) string {
	return "mccm-service=" + svc.Namespace + "/" + svc.Name
}

// ownerListeners says which listeners are the owner's: those no sharing
// Service claims (by our tag, or cloud-provider-openstack's tag naming a
// Service other than the load balancer's own) that this backend made (named
// mccm_<protocol>_<port>) or cloud-provider-openstack made for the load
// balancer's own Service (tagged with the load balancer's name, or named
// listener_<i>_<load balancer name> as its older releases did, untagged).
// Any other listener (one an operator added by hand) is a stranger: never
// changed or deleted, and a port it serves is refused to the Service; it
// goes with the load balancer when the load balancer is deleted.
func ownerListeners(lb *loadbalancers.LoadBalancer) func(*listeners.Listener) bool {
	return func(ls *listeners.Listener) bool {
		for _, t := range ls.Tags {
			if strings.HasPrefix(t, sharedTagPrefix) || (strings.HasPrefix(t, occmTagPrefix) && t != lb.Name) {
				return false
			}
		}
		return strings.HasPrefix(ls.Name, listenerNamePrefix) || slices.Contains(ls.Tags, lb.Name) ||
			(strings.HasPrefix(ls.Name, "listener_") && strings.HasSuffix(ls.Name, "_"+lb.Name))
	}
}

// listenerNamePrefix starts the names of the listeners (and pools) this
// backend makes: mccm_<protocol>_<port>.
const listenerNamePrefix = "mccm_"

// sharerListeners says which listeners are a sharing Service's: tagged
// with its tag, or with cloud-provider-openstack's for it.
func (l *LoadBalancer) sharerListeners(clusterName string, svc *corev1.Service) func(*listeners.Listener) bool {
	mine, occm := l.sharedTag(svc), occmName(clusterName, svc)
	return func(ls *listeners.Listener) bool {
		return slices.Contains(ls.Tags, mine) || slices.Contains(ls.Tags, occm)
	}
}

// sharers counts the Services other than svc a load balancer serves: its
// owner while it has one (our mccm-service tag, or cloud-provider-openstack's
// tag naming the load balancer's own Service: an owner that was deleted
// while others shared is not counted) and every sharing Service (ours and
// cloud-provider-openstack's).
func (l *LoadBalancer) sharers(lb *loadbalancers.LoadBalancer, svc *corev1.Service, clusterName string) int {
	n := 0
	for _, t := range lb.Tags {
		if strings.HasPrefix(t, "mccm-service=") || (strings.HasPrefix(t, occmTagPrefix) && t == lb.Name) {
			n = 1
			break
		}
	}
	for _, t := range lb.Tags {
		if (strings.HasPrefix(t, sharedTagPrefix) && t != l.sharedTag(svc)) ||
			(strings.HasPrefix(t, occmTagPrefix) && t != lb.Name && t != occmName(clusterName, svc)) {
			n++
		}
	}
	return n
}

// checkShare refuses what cloud-provider-openstack refuses: more Services
// on one load balancer than loadBalancer.maxSharedLB, and an internal
// Service sharing (the owner's floating IP would expose it).
func (l *LoadBalancer) checkShare(lb *loadbalancers.LoadBalancer, svc *corev1.Service, clusterName string, o *lbOptions) error {
	id := string(AnnotationLoadBalancerID) + "=" + lb.ID
	if o.internal {
		return backends.NewUserError(reasonShared, fmt.Errorf("annotation %s: an internal Service cannot share a load balancer (its owner's floating IP would expose it): remove %s or %s", id, AnnotationInternal, AnnotationLoadBalancerID))
	}
	if n := l.sharers(lb, svc, clusterName); !slices.Contains(lb.Tags, l.sharedTag(svc)) && n+1 > l.settings.MaxSharedLB {
		return backends.NewUserError(reasonShared, fmt.Errorf("annotation %s: the load balancer already serves %d Services and loadBalancer.maxSharedLB is %d: raise it or remove the annotation", id, n, l.settings.MaxSharedLB))
	}
	return nil
}

// ensureShared converges a sharing Service's part of a load balancer:
// its tag, then its listeners. It never changes the floating IP.
func (l *LoadBalancer) ensureShared(ctx context.Context, sc *serviceClients, clusterName string, svc *corev1.Service, lb *loadbalancers.LoadBalancer, want []listenerSpec, o *lbOptions) (*corev1.LoadBalancerStatus, error) {
	attached := slices.Contains(lb.Tags, l.sharedTag(svc))
	if err := l.checkShare(lb, svc, clusterName, o); err != nil {
		return nil, err
	}
	if lb.ProvisioningStatus != lbActive {
		return nil, l.retry("shared load balancer %s is %s", lb.ID, lb.ProvisioningStatus)
	}
	if !attached {
		// Refuse a port clash before joining: a refused Service changes
		// nothing.
		st, err := l.state(ctx, sc, lb.ID)
		if err != nil {
			return nil, err
		}
		if err := splitShared(st, want, l.sharerListeners(clusterName, svc), lb.ID); err != nil {
			return nil, err
		}
		// load-balancer-id changed from another shared load balancer:
		// leave that one first.
		if err := l.leaveOtherShares(ctx, sc, clusterName, svc, lb.ID, o); err != nil {
			return nil, err
		}
		room := func(cur, _ *loadbalancers.LoadBalancer) (bool, error) {
			return false, l.checkShare(cur, svc, clusterName, o)
		}
		if _, err := l.retagShared(ctx, sc, svc, lb, append(slices.Clone(lb.Tags), l.sharedTag(svc)), "joined by", room); err != nil || !backends.DryRun(ctx) {
			return nil, err
		}
		// A dry run goes on as if the Service had joined: its listeners
		// are planned next.
	}
	for i := range want {
		want[i].tags = []string{l.sharedTag(svc)}
	}
	if err := l.converge(ctx, sc, svc, lb, want, l.sharerListeners(clusterName, svc)); err != nil {
		return nil, err
	}
	addr, err := l.sharedAddress(ctx, sc, lb)
	if err != nil {
		return nil, err
	}
	addrs := serviceAddresses(svc, lb, addr)
	reportServed(ctx, lb.ID, addrs)
	return status(addrs, o), nil
}

// sharedTurns serialise, for the process, the changes of a load
// balancer's tags and the deletion of a shared one by its last Service,
// by the load balancer's ID: every backend value of the process takes
// part (two backends on one Octavia project, the generations of a
// reload), as the tags they write are the same (see retagShared).
var sharedTurns backends.ServiceLocks

// inTurn waits for the load balancer's turn (sharedTurns) and reads it
// as it is then; unlock ends the turn. One that is not ACTIVE (or ERROR)
// is asked to come back to: Octavia refuses its changes.
func (l *LoadBalancer) inTurn(ctx context.Context, sc *serviceClients, id string) (cur *loadbalancers.LoadBalancer, unlock func(), err error) {
	unlock, err = sharedTurns.LockKey(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	cur, err = loadbalancers.Get(ctx, sc.loadBalancer, id).Extract()
	if err == nil && cur.ProvisioningStatus != lbActive && cur.ProvisioningStatus != lbError {
		err = l.retry("load balancer %s is %s", id, cur.ProvisioningStatus)
	} else if err != nil {
		err = fmt.Errorf("reading shared load balancer %s before changing its tags or deleting it: %w", id, err)
	}
	if err != nil {
		unlock()
		return nil, nil, err
	}
	return cur, unlock, nil
}

// retagShared changes a shared load balancer's tags from lb's to tags
// and asks to come back; it returns the tags written (nil when it wrote
// none).
//
// Octavia replaces the whole list, and two Services leaving (or one
// joining while another leaves) each read the load balancer before the
// other's change landed: written from lb, the second change would put
// back the tag the first removed, and the load balancer, tagged for a
// Service that is gone, would never be abandoned (a leak; seen in CI as
// TestServiceControllerSharedOwnerKeepsFloatingIP). So the changes take
// turns (inTurn), each applied to the tags as they are when its turn
// comes. check, when set, is asked first, in the same turn, with the
// load balancer as it is (cur) and as the change would leave it (rest):
// when it reports done, or an error, nothing is written. A Service
// joining checks the load balancer's room again (maxSharedLB: two
// joining at once read the same count); a Service leaving deletes a load
// balancer its change would leave abandoned (the others left meanwhile),
// while its tag still finds it.
//
// Under a dry run it records the change and returns tags and nil: the
// caller goes on as if it were made.
func (l *LoadBalancer) retagShared(ctx context.Context, sc *serviceClients, svc *corev1.Service, lb *loadbalancers.LoadBalancer, tags []string, what string, check func(cur, rest *loadbalancers.LoadBalancer) (done bool, err error)) ([]string, error) {
	if dryRun(ctx, backends.IntentChange, "PUT load balancer tags", "shared load balancer "+lb.ID+" "+what+" "+svc.Namespace+"/"+svc.Name) {
		return tags, nil
	}
	cur, unlock, err := l.inTurn(ctx, sc, lb.ID)
	if err != nil {
		return nil, err
	}
	defer unlock()
	tags = rebaseTags(lb.Tags, tags, cur.Tags)
	if check != nil {
		rest := *cur
		rest.Tags = tags
		if done, err := check(cur, &rest); done || err != nil {
			return nil, err
		}
	}
	l.mutating(lb.ID)
	if _, err := loadbalancers.Update(ctx, sc.loadBalancer, lb.ID, loadbalancers.UpdateOpts{Tags: &tags}).Extract(); err != nil {
		return nil, fmt.Errorf("tagging shared load balancer %s: %w", lb.ID, err)
	}
	l.logger(ctx, svc).V(2).Info("Shared load balancer "+what+" Service", "loadBalancerID", lb.ID)
	l.reportChange(ctx, lb.ID, "load balancer "+what+" "+svc.Namespace+"/"+svc.Name)
	return tags, l.retry("shared load balancer %s %s %s/%s", lb.ID, what, svc.Namespace, svc.Name)
}

// rebaseTags applies the change from read to want (the tags added, the
// tags removed) to cur, the tags as they are now.
func rebaseTags(read, want, cur []string) []string {
	out := make([]string, 0, len(cur)+len(want))
	for _, t := range cur {
		if !slices.Contains(read, t) || slices.Contains(want, t) {
			out = append(out, t)
		}
	}
	for _, t := range want {
		if !slices.Contains(read, t) && !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

// sharedAddress is a shared load balancer's floating IP, else its VIP.
func (l *LoadBalancer) sharedAddress(ctx context.Context, sc *serviceClients, lb *loadbalancers.LoadBalancer) (string, error) {
	if sc.network == nil {
		return lb.VipAddress, nil
	}
	fips, err := l.floatingIPs(ctx, sc, lb.ID, floatingips.ListOpts{PortID: lb.VipPortID})
	if err != nil || len(fips) == 0 {
		return lb.VipAddress, err
	}
	return fips[0].FloatingIP, nil
}

// leave removes a Service's part of a shared load balancer, one change per
// call: its listeners (pool first), then its tag (mccm-service for the
// owner, mccm-shared for a sharing Service). The load balancer itself is
// deleted only when no Service is left on it and this cluster made it (or
// adopted it from cloud-provider-openstack); a load balancer made outside
// is never deleted.
func (l *LoadBalancer) leave(ctx context.Context, sc *serviceClients, svc *corev1.Service, lb *loadbalancers.LoadBalancer, owns func(*listeners.Listener) bool, tag string, o *lbOptions) error {
	return l.leaveThen(ctx, sc, svc, lb, owns, tag, o, nil)
}

// leaveAsOwner removes the owner's part of a load balancer other Services
// share: its listeners, then it hands its floating IP over to the load
// balancer (so the owner's clean-up no longer releases it and the last
// Service leaving does), then its tag. A floating IP the owner asked to
// keep (keep-floatingip) is the user's: it is disassociated and kept, as
// when an unshared Service is deleted, never handed over (the remaining
// Services then report the VIP address).
func (l *LoadBalancer) leaveAsOwner(ctx context.Context, sc *serviceClients, svc *corev1.Service, lb *loadbalancers.LoadBalancer, o *lbOptions) error {
	return l.leaveThen(ctx, sc, svc, lb, ownerListeners(lb), ownerTag(svc), o, func() error {
		if sc.network == nil {
			return nil
		}
		fips, err := l.floatingIPs(ctx, sc, lb.ID, floatingips.ListOpts{PortID: lb.VipPortID})
		if err != nil {
			return err
		}
		for _, f := range fips {
			if f.Description != l.lbName(svc) && !strings.HasPrefix(f.Description, occmFloatingIPDescription(svc)) {
				continue
			}
			if o.keepFloatingIP {
				if err := l.release(ctx, sc, svc, lb.ID, &f, true); err != nil {
					return err
				}
				continue
			}
			if dryRun(ctx, backends.IntentChange, "PUT floating IP", "floating IP "+f.FloatingIP+" handed over to the load balancer's remaining Services") {
				continue
			}
			l.mutating(lb.ID)
			if _, err := floatingips.Update(ctx, sc.network, f.ID, floatingips.UpdateOpts{Description: ptr(sharedFIPDescription(lb.ID))}).Extract(); err != nil {
				return fmt.Errorf("handing floating IP %s over to shared load balancer %s: %w", f.FloatingIP, lb.ID, err)
			}
			l.reportChange(ctx, lb.ID, "floating IP "+f.FloatingIP+" handed over to the load balancer's remaining Services")
		}
		return nil
	})
}

// leaveOtherShares removes the Service's part (listeners, then its
// mccm-shared tag) of every load balancer it shares other than keep, one
// change per call: its load-balancer-id annotation was removed or now names
// another load balancer. Left in place, its listeners would keep serving
// there and its tag would keep that load balancer from ever being
// abandoned (a leak). The last Service leaving a load balancer this
// cluster made deletes it, as on a delete.
func (l *LoadBalancer) leaveOtherShares(ctx context.Context, sc *serviceClients, clusterName string, svc *corev1.Service, keep string, o *lbOptions) error {
	shared, err := l.list(ctx, sc, loadbalancers.ListOpts{Tags: []string{l.sharedTag(svc)}})
	if err != nil {
		return err
	}
	for i := range shared {
		if shared[i].ID == keep {
			continue
		}
		if err := l.leave(ctx, sc, svc, &shared[i], l.sharerListeners(clusterName, svc), l.sharedTag(svc), o); err != nil {
			return err
		}
	}
	return nil
}

// sharedFIPDescription describes a floating IP whose owner Service left a
// shared load balancer: it is released with the load balancer.
func sharedFIPDescription(lbID string) string {
	return sharedFIPPrefix + lbID
}

// sharedFIPPrefix starts sharedFIPDescription.
const sharedFIPPrefix = "multicloud-ccm: floating IP of shared load balancer "

// getShared reports a sharing Service's load balancer: existing while the
// Service is attached to it, and while it is abandoned (the last Service
// leaving deletes it, so its delete must go on).
func (l *LoadBalancer) getShared(ctx context.Context, sc *serviceClients, svc *corev1.Service, lb *loadbalancers.LoadBalancer) (*corev1.LoadBalancerStatus, bool, error) {
	if !slices.Contains(lb.Tags, l.sharedTag(svc)) {
		return nil, l.abandoned(lb), nil
	}
	addr, err := l.sharedAddress(ctx, sc, lb)
	if err != nil {
		return nil, true, l.wrap("getting", svc, err)
	}
	return status(serviceAddresses(svc, lb, addr), l.lenientOptions(ctx, svc)), true, nil
}

// releaseSharedFIPs releases the floating IPs on an abandoned shared load
// balancer's VIP port that a Service of this cluster or
// cloud-provider-openstack allocated (only disassociated with
// keep-floatingip); any other is only disassociated.
func (l *LoadBalancer) releaseSharedFIPs(ctx context.Context, sc *serviceClients, svc *corev1.Service, lb *loadbalancers.LoadBalancer, keep bool) error {
	if sc.network == nil {
		return nil
	}
	fips, err := l.floatingIPs(ctx, sc, lb.ID, floatingips.ListOpts{PortID: lb.VipPortID})
	if err != nil {
		return err
	}
	for _, f := range fips {
		ours := f.Description == lb.Name || f.Description == sharedFIPDescription(lb.ID) || strings.HasPrefix(f.Description, "Floating IP for Kubernetes external service ")
		if backends.DryRun(ctx) {
			call, what := "PUT floating IP", " disassociated"
			if ours && !keep {
				call, what = "DELETE floating IP", " released"
			}
			dryRun(ctx, backends.IntentChange, call, "floating IP "+f.FloatingIP+what)
			continue
		}
		l.mutating(lb.ID)
		if ours && !keep {
			if err := ignoreNotFound(floatingips.Delete(ctx, sc.network, f.ID).ExtractErr()); err != nil {
				return fmt.Errorf("releasing floating IP %s: %w", f.FloatingIP, err)
			}
			l.reportChange(ctx, lb.ID, "floating IP "+f.FloatingIP+" released")
			continue
		}
		if _, err := floatingips.Update(ctx, sc.network, f.ID, floatingips.UpdateOpts{PortID: new(string)}).Extract(); err != nil {
			return fmt.Errorf("disassociating floating IP %s: %w", f.FloatingIP, err)
		}
		l.reportChange(ctx, lb.ID, "floating IP "+f.FloatingIP+" disassociated")
	}
	l.logger(ctx, svc).V(2).Info("Released the floating IPs of an abandoned shared load balancer", "loadBalancerID", lb.ID)
	return nil
}

// leaveThen is leave with a step run after the listeners are gone and
// before the tag is removed.
func (l *LoadBalancer) leaveThen(ctx context.Context, sc *serviceClients, svc *corev1.Service, lb *loadbalancers.LoadBalancer, owns func(*listeners.Listener) bool, tag string, o *lbOptions, beforeUntag func() error) error {
	if lb.ProvisioningStatus != lbActive && lb.ProvisioningStatus != lbError {
		return l.retry("shared load balancer %s is %s", lb.ID, lb.ProvisioningStatus)
	}
	st, err := l.state(ctx, sc, lb.ID)
	if err != nil {
		return err
	}
	for i := range st.listeners {
		if ls := &st.listeners[i]; owns(ls) {
			s := removeListenerStep(sc.loadBalancer, ls)
			if dryRun(ctx, backends.IntentChange, "octavia", listenerName(ls.Protocol, ls.ProtocolPort)+" of "+svc.Namespace+"/"+svc.Name+" deleted with its pool") {
				continue
			}
			l.mutating(lb.ID)
			if err := s.do(ctx); err != nil {
				return l.retry("shared load balancer %s: %s: %v", lb.ID, s.what(false), err)
			}
			l.reportChange(ctx, lb.ID, s.what(false))
			return l.retry("shared load balancer %s: %s", lb.ID, s.what(false))
		}
	}
	if slices.Contains(lb.Tags, tag) {
		if beforeUntag != nil {
			if err := beforeUntag(); err != nil {
				return err
			}
		}
		left, err := l.retagShared(ctx, sc, svc, lb, slices.DeleteFunc(slices.Clone(lb.Tags), func(t string) bool { return t == tag }), "left by",
			func(_, rest *loadbalancers.LoadBalancer) (bool, error) {
				if !l.abandoned(rest) {
					return false, nil
				}
				return true, l.deleteAbandoned(ctx, sc, svc, rest, o)
			})
		if left == nil {
			return err // nothing written
		}
		rest := *lb
		rest.Tags = left
		if backends.DryRun(ctx) && err == nil {
			// A dry run goes on as if the tag were gone.
			return l.deleteAbandoned(ctx, sc, svc, &rest, o)
		}
		if re := (*api.RetryError)(nil); errors.As(err, &re) && !l.abandoned(&rest) {
			// Nothing of the Service is left, and the load balancer stays
			// for the others: the delete is done (a retry would cost the
			// service controller's next back-off step).
			return nil
		}
		return err
	}
	if !l.abandoned(lb) || backends.DryRun(ctx) {
		return l.deleteAbandoned(ctx, sc, svc, lb, o)
	}
	// Abandoned as read: deleted in its turn, as it is then (a Service
	// may have joined since).
	cur, unlock, err := l.inTurn(ctx, sc, lb.ID)
	if err != nil {
		return err
	}
	defer unlock()
	return l.deleteAbandoned(ctx, sc, svc, cur, o)
}

// deleteAbandoned deletes a shared load balancer no Service uses any more
// (abandoned), its floating IPs first; any other is left alone.
func (l *LoadBalancer) deleteAbandoned(ctx context.Context, sc *serviceClients, svc *corev1.Service, lb *loadbalancers.LoadBalancer, o *lbOptions) error {
	if !l.abandoned(lb) {
		return nil
	}
	if err := l.releaseSharedFIPs(ctx, sc, svc, lb, o.keepFloatingIP); err != nil {
		return err
	}
	if dryRun(ctx, backends.IntentDelete, "DELETE load balancer (cascade)", "shared load balancer "+lb.ID+" deleted with its last Service") {
		return nil
	}
	return l.deleteOne(ctx, sc, svc, lb, o, "shared load balancer "+lb.ID+" deleted with its last Service")
}

// abandoned reports a load balancer this cluster made (or adopted) that no
// Service uses any more.
func (l *LoadBalancer) abandoned(lb *loadbalancers.LoadBalancer) bool {
	if !slices.Contains(lb.Tags, "mccm-cluster="+l.clusterID) {
		return false
	}
	for _, t := range lb.Tags {
		if strings.HasPrefix(t, "mccm-service=") || strings.HasPrefix(t, sharedTagPrefix) || (strings.HasPrefix(t, occmTagPrefix) && t != lb.Name) {
			return false
		}
	}
	return true
}

// sharedByOthers reports whether Services other than the owner share the
// load balancer.
func sharedByOthers(lb *loadbalancers.LoadBalancer) bool {
	for _, t := range lb.Tags {
		if strings.HasPrefix(t, sharedTagPrefix) || (strings.HasPrefix(t, occmTagPrefix) && t != lb.Name) {
			return true
		}
	}
	return false
}
