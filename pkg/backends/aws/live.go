package aws

import (
	"sync"
	"weak"
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

// register adds l to live.
func register(l *LoadBalancer) *LoadBalancer {
	live.mu.Lock()
	defer live.mu.Unlock()
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
// none does.
func (l *LoadBalancer) holderOf(arn string) string {
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
}

// set records arn as the Service's untagged NLB ("": it has none).
func (h *heldUntagged) set(service, arn string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if old := h.arns[service]; old != "" {
		delete(h.services, old)
		delete(h.arns, service)
	}
	if arn == "" {
		return
	}
	if h.arns == nil {
		h.arns, h.services = map[string]string{}, map[string]string{}
	}
	h.arns[service], h.services[arn] = arn, service
}

// has reports whether the Service's NLB was found untagged.
func (h *heldUntagged) has(service string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.arns[service] != ""
}

// holds reports whether arn is one of the untagged NLBs held.
func (h *heldUntagged) holds(arn string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.services[arn] != ""
}
