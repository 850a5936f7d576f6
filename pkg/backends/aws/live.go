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

// liveOther reports whether name is another backend than this one, live
// in this process in the same VPC and region, whatever its credentials
// and endpoints (a VPC ID names one VPC of one account: an NLB of another
// account is never found by name; TestReview65cSameVPCBackendWithItsEndpointSpelledOtherwise).
func (l *LoadBalancer) liveOther(name string) bool {
	if name == "" || name == l.backend {
		return false
	}
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
		if o.backend == name && o.settings.VPC == l.settings.VPC && o.settings.Region == l.settings.Region {
			found = true
		}
	}
	clear(live.lbs[len(kept):])
	live.lbs = kept
	return found
}
