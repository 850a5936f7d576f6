package aws

import (
	"context"
	"sync"
	"weak"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// live are the load-balancer halves of every aws backend this process
// built and still holds (a reload's discarded ones until the garbage
// collector takes them): liveOther asks which other backend shares a
// backend's VPC. Two backends in one VPC are in one account and region
// (a VPC ID is unique), where an NLB's name is unique, whatever their
// credentials (TestReview65bMoveBetweenTwoBackendsOfOneVPCWithOwnCredentials).
var live struct {
	mu  sync.Mutex
	lbs []weak.Pointer[LoadBalancer]
}

// register adds l to live. A backend a reload rebuilt (the same name,
// cluster, VPC, region and ELBv2 endpoint, its predecessor still live)
// shares what its predecessor remembers per Service, from then on: the
// untagged NLBs it serves (TestReview66bRebuiltBackendStillHoldsTheUntaggedNLB:
// else another backend of the VPC takes them once the old object is
// collected) and the versions its reconciles began with (specMemory).
// Shared, not copied: the old object's calls still in flight record in
// the same memory (TestReview66cOldObjectsInFlightAdoptionAfterTheCopy),
// and every generation of rebuilds has one
// (TestReview66cTwoRebuildsAfterAnInFlightEnsure). A rebuild that also
// changes the endpoint starts afresh.
func register(l *LoadBalancer) *LoadBalancer {
	live.mu.Lock()
	defer live.mu.Unlock()
	for _, p := range live.lbs {
		if o := p.Value(); o != nil && o.backend == l.backend && o.clusterID == l.clusterID &&
			o.settings.VPC == l.settings.VPC && o.settings.Region == l.settings.Region &&
			o.settings.Endpoints.ELBv2 == l.settings.Endpoints.ELBv2 {
			l.untagged, l.specs = o.untagged, o.specs
			break
		}
	}
	live.lbs = append(live.lbs, weak.Make(l))
	return l
}

// liveOthers calls f for each other backend (another name than this
// one's) live in this process in the same VPC and region, whatever its
// credentials and endpoints (a VPC ID names one VPC of one account: an NLB
// of another account is never found by name;
// TestReview65cSameVPCBackendWithItsEndpointSpelledOtherwise), until f
// returns true; it reports whether f did. f runs under live's lock.
func (l *LoadBalancer) liveOthers(f func(o *LoadBalancer) bool) bool {
	live.mu.Lock()
	defer live.mu.Unlock()
	found := false
	kept := live.lbs[:0]
	for _, p := range live.lbs {
		o := p.Value()
		if o == nil {
			continue
		}
		kept = append(kept, p)
		if !found && o.backend != l.backend && o.settings.VPC == l.settings.VPC && o.settings.Region == l.settings.Region {
			found = f(o)
		}
	}
	clear(live.lbs[len(kept):])
	live.lbs = kept
	return found
}

// liveOther reports whether name is another backend than this one, live
// in this process in the same VPC and region (liveOthers).
func (l *LoadBalancer) liveOther(name string) bool {
	if name == "" || name == l.backend {
		return false
	}
	return l.liveOthers(func(o *LoadBalancer) bool { return o.backend == name })
}

// sharesVPC reports whether another backend is live in this process in
// the same VPC and region (liveOthers).
func (l *LoadBalancer) sharesVPC() bool {
	return l.liveOthers(func(*LoadBalancer) bool { return true })
}

// holderOf returns the other backend live in the same VPC and region
// (liveOthers) that serves the untagged NLB arn (heldUntagged), "" if
// none does. In a dry run, what the run itself held or let go (hold)
// comes first.
func (l *LoadBalancer) holderOf(ctx context.Context, arn string) string {
	if m := backends.DryRunState(ctx); m != nil {
		if v, ok := m.Load(dryHoldKey{arn}); ok {
			if name := v.(string); name != "" && name != l.backend && l.liveOther(name) {
				return name
			}
			return ""
		}
	}
	var holder string
	l.liveOthers(func(o *LoadBalancer) bool {
		if o.untagged.holds(arn) {
			holder = o.backend
			return true
		}
		return false
	})
	return holder
}

// hold records arn as the untagged NLB the backend found as the Service's
// ("": none, or it let it go). A dry run's stays in the run
// (backends.DryRunState): a later call of the same plan, another
// backend's included, sees it as the switch would (a Service on two
// backends of one VPC: TestReview66bPlanOfAServiceOnTwoBackendsOfOneVPC).
func (l *LoadBalancer) hold(ctx context.Context, service, arn string) {
	m := backends.DryRunState(ctx)
	if m == nil {
		l.untagged.set(service, arn)
		return
	}
	key := dryServiceKey{l.backend, service}
	if arn == "" {
		if v, ok := m.Load(key); ok {
			arn = v.(string)
		} else {
			arn = l.untagged.arnOf(service)
		}
		if arn != "" {
			m.Store(dryHoldKey{arn}, "")
		}
		m.Delete(key)
		return
	}
	m.Store(key, arn)
	m.Store(dryHoldKey{arn}, l.backend)
}

// dryHoldKey keys, in a dry run's state, the backend holding an untagged
// NLB ("" let go); dryServiceKey a backend's untagged NLB of a Service.
type (
	dryHoldKey    struct{ arn string }
	dryServiceKey struct{ backend, service string }
)

// heldUntagged are the NLBs without a multicloud-ccm.io/backend tag (the
// upstream provider's, adopted unchanged while the backend was alone in
// its VPC) that the backend last found as a Service's (observe): another
// backend of the VPC finds them this one's (holderOf) until this backend's
// next reconcile or node sync tags them (claim), so that it neither
// adopts nor deletes them.
type heldUntagged struct {
	mu sync.Mutex
	// arns are the NLBs by Service, services the Services by NLB.
	arns, services map[string]string
	// claimed are the Services whose NLB this backend has since tagged
	// (claim): still held until the next look at it finds the tag, so that
	// another backend that read it untagged a moment before still finds
	// it this one's; no longer to be claimed (needsClaim).
	claimed map[string]bool
}

// set records arn as the Service's untagged NLB ("": it has none).
func (h *heldUntagged) set(service, arn string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if old := h.arns[service]; old != "" {
		delete(h.services, old)
		delete(h.arns, service)
	}
	delete(h.claimed, service)
	if arn == "" {
		return
	}
	if h.arns == nil {
		h.arns, h.services, h.claimed = map[string]string{}, map[string]string{}, map[string]bool{}
	}
	h.arns[service], h.services[arn] = arn, service
}

// markClaimed records that the Service's held NLB is tagged as this
// backend's now.
func (h *heldUntagged) markClaimed(service string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.arns[service] != "" {
		h.claimed[service] = true
	}
}

// arnOf returns the Service's untagged NLB, "" if none.
func (h *heldUntagged) arnOf(service string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.arns[service]
}

// needsClaim reports whether the Service's NLB was found untagged and
// this backend has not tagged it since.
func (h *heldUntagged) needsClaim(service string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.arns[service] != "" && !h.claimed[service]
}

// holds reports whether arn is one of the untagged NLBs held.
func (h *heldUntagged) holds(arn string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.services[arn] != ""
}
