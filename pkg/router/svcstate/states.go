package svcstate

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// What lives for the process and what for a configuration
// (docs/routing.md, DESIGN.md contract 12):
//
//	 process (States, one for the Reloadable)             configuration (Router, one per generation)
//	+---------------------------------------------+     +------------------------------------------+
//	| per Service, by UID:                        |     | backends (clients, caches, health)       |
//	|   lock          serialises every LB call    |<----| node rules, classes, defaultBackend      |
//	|   deletion mark  no re-create after delete  |     | served counts (the router's served.go)   |
//	|   record         what this process wrote    |     |                                          |
//	| draining records written                    |     +------------------------------------------+
//	| (drain timer, node re-sync: process.go)     |
//	| problems logged once, cluster name          |        ^ Apply swaps this box only; a call in
//	+---------------------------------------------+        | flight finishes on the one it began on,
//	      ^ shared by every generation's Router            | under the same per-Service lock.
//
// A call that began on a retired configuration and one on the new one take
// the same lock, see the same deletion marks and records, and a re-sync
// queued under one is carried out under the next: the queue's workers run
// on the configuration in use when they pick the Service up.

// States is the router's per-Service and per-Node state. It is
// created once for the process (NewReloadable, or New for a router used
// alone) and handed to every configuration's Router; a reload never
// rebuilds it.
type States struct {
	mu sync.Mutex
	// recorded holds, per Service UID, the load-balancer record this
	// process last wrote (see pkg/router/lifecycle/record.go), empty ones
	// too: the router's written() trusts an empty entry over a stale
	// copy's annotation. Entries go when their Service does (Forget); a
	// gone Service's record naming a backend stays until its gone mark
	// expires.
	recorded map[types.UID][]string
	// deleted holds, per Service UID, when the router finished deleting the
	// load balancer of that Service while it was being deleted (see
	// markDeleted).
	deleted map[types.UID]time.Time
	// locks serialises load-balancer calls per Service UID.
	locks map[types.UID]*svcLock
	// goneAt holds when each Service forgotten in the last deletedFor was
	// seen deleted, and gone the same entries oldest first, to expire
	// them. A call still in flight for a gone Service (an Ensure begun
	// before its finalizer was removed by hand) writes none of its state
	// back: its drains, addresses and unreachable backends are dropped. A
	// record naming a backend is kept until the entry expires, for a
	// delete still to come with an older copy of the Service.
	goneAt map[types.UID]time.Time
	gone   []goneEntry
	// now is the clock (time.Now; tests set another).
	now func() time.Time
	// drains holds, per Service UID, the draining record this process
	// last wrote (see the router's drain.go); the Service's annotation is the truth
	// across restarts.
	drains map[types.UID]Draining
	// shown holds, per Service UID and backend, the addresses that
	// backend's last answer gave the Service (see the router's shown.go).
	shown map[types.UID]map[string][]string
	// unreachable holds, per Service UID, the recorded backends that are
	// not configured (a reload removed them while they held, or drained,
	// its load balancer) the Service was last warned about: one Warning
	// per episode (see NewlyUnreachable).
	unreachable map[types.UID][]string

	// ClusterName is the last cluster name the service controller passed.
	ClusterName atomic.Value
	// Problems keeps each object's last reported problem, to log it once.
	Problems problems
	// LabelRefusedUntil is when the router next tries to write a node's
	// platform label after the API server refused one (Forbidden: its
	// identity may not patch nodes), in Unix nanoseconds; 0 when none was
	// refused. See labelPlatform.
	LabelRefusedUntil atomic.Int64
}

// New returns empty per-Service state.
func New() *States {
	return &States{
		recorded: map[types.UID][]string{},
		deleted:  map[types.UID]time.Time{},
		locks:    map[types.UID]*svcLock{},
		goneAt:   map[types.UID]time.Time{},
		drains:   map[types.UID]Draining{},
		shown:    map[types.UID]map[string][]string{},

		unreachable: map[types.UID][]string{},
		now:         time.Now,
	}
}

type goneEntry struct {
	uid types.UID
	at  time.Time
}

// Lock serialises the load-balancer calls for one Service, whatever
// configuration serves them. It returns the unlock function.
func (st *States) Lock(uid types.UID) func() {
	st.mu.Lock()
	l, ok := st.locks[uid]
	if !ok {
		l = &svcLock{}
		st.locks[uid] = l
	}
	l.refs++
	st.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		st.mu.Lock()
		l.refs--
		if l.refs == 0 {
			delete(st.locks, uid)
		}
		st.mu.Unlock()
	}
}

type svcLock struct {
	mu   sync.Mutex
	refs int
}

// MarkDeleted remembers that the load balancer of the Service with uid is
// gone with the Service, dropping marks older than deletedFor.
func (st *States) MarkDeleted(uid types.UID) {
	st.mu.Lock()
	defer st.mu.Unlock()
	now := st.now()
	for u, at := range st.deleted {
		if now.Sub(at) > deletedFor {
			delete(st.deleted, u)
		}
	}
	st.deleted[uid] = now
}

// WasDeleted reports whether markDeleted saw the Service's UID recently.
func (st *States) WasDeleted(uid types.UID) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	at, ok := st.deleted[uid]
	return ok && st.now().Sub(at) <= deletedFor
}

// RecordedOf returns what this process last wrote as the Service's record.
func (st *States) RecordedOf(uid types.UID) ([]string, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	mem, ok := st.recorded[uid]
	return mem, ok
}

// Remember records what this process last wrote as the Service's record.
// For a Service that is gone, an empty record is dropped and one naming a
// backend kept until the Service's entry in goneAt expires.
func (st *States) Remember(uid types.UID, names []string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if _, gone := st.goneAt[uid]; gone && len(names) == 0 {
		delete(st.recorded, uid)
		return
	}
	st.recorded[uid] = names
}

// Forget drops the per-Service state of a Service that is gone, and keeps
// it gone for deletedFor: a call still in flight with an older copy of the
// Service writes nothing back (see goneAt). A record still naming a
// backend is kept that long: the Service went without the router's delete
// (its finalizer removed by hand, or no finalizer), and a delete with a
// copy of the Service older than the record may still come; it must reach
// every backend this process recorded.
func (st *States) Forget(uid types.UID) {
	st.mu.Lock()
	defer st.mu.Unlock()
	now := st.now()
	expired := 0
	for _, g := range st.gone {
		if now.Sub(g.at) <= deletedFor {
			break
		}
		delete(st.recorded, g.uid)
		delete(st.goneAt, g.uid)
		expired++
	}
	st.gone = slices.Delete(st.gone, 0, expired)
	delete(st.drains, uid)
	delete(st.shown, uid)
	delete(st.unreachable, uid)
	if len(st.recorded[uid]) == 0 {
		delete(st.recorded, uid)
	}
	if _, ok := st.goneAt[uid]; !ok {
		st.goneAt[uid] = now
		st.gone = append(st.gone, goneEntry{uid: uid, at: now})
	}
}

// IsGone reports whether the Service with uid was forgotten (seen deleted)
// in the last deletedFor. A UID never comes back: a call beginning after
// that, with an older copy of the Service (a node sync, a repair), has
// nothing to create or update.
func (st *States) IsGone(uid types.UID) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	at, ok := st.goneAt[uid]
	return ok && st.now().Sub(at) <= deletedFor
}

// Gone counts the Services forgotten in the last deletedFor, for tests of
// their bound.
func (st *States) Gone() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return len(st.goneAt)
}

// DrainsOf returns the draining record this process last wrote for the
// Service, if any.
func (st *States) DrainsOf(uid types.UID) (Draining, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	d, ok := st.drains[uid]
	return d, ok
}

// SetDrains remembers the draining record written for the Service; an
// empty one, or one for a Service that is gone (Forget), is forgotten.
func (st *States) SetDrains(uid types.UID, d Draining) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if _, gone := st.goneAt[uid]; len(d) == 0 || gone {
		delete(st.drains, uid)
		return
	}
	st.drains[uid] = d
}

// Size counts the entries kept, for tests of their bound.
func (st *States) Size() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return len(st.recorded) + len(st.locks) + len(st.drains) + len(st.shown)
}

// ShownOf returns, per backend, the addresses its last answer gave the
// Service.
func (st *States) ShownOf(uid types.UID) (map[string][]string, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	m, ok := st.shown[uid]
	if !ok {
		return nil, false
	}
	out := make(map[string][]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out, true
}

// SetShown remembers the addresses backend's answer gave the Service,
// unless the Service is gone (Forget).
func (st *States) SetShown(uid types.UID, backend string, keys []string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if _, gone := st.goneAt[uid]; gone {
		return
	}
	m, ok := st.shown[uid]
	if !ok {
		m = map[string][]string{}
		st.shown[uid] = m
	}
	m[backend] = keys
}

// deletedFor is how long the router refuses to ensure a load balancer for
// a Service whose deletion it completed: longer than any queued call can
// wait for the Service's lock.
const deletedFor = 10 * time.Minute

// IngressKey identifies an address of a status.
func IngressKey(in corev1.LoadBalancerIngress) string { return in.IP + "|" + in.Hostname }

// Waiters counts the calls holding or waiting for the Service's lock, for
// tests of the lock's hand-over.
func (st *States) Waiters(uid types.UID) int {
	st.mu.Lock()
	defer st.mu.Unlock()
	if l, ok := st.locks[uid]; ok {
		return l.refs
	}
	return 0
}

// NewlyUnreachable remembers names as the Service's recorded backends that
// are not configured, and returns those of them it did not name the last
// time: each is warned about once, until it is configured again or leaves
// the record (an episode), not at every sync. Nothing is remembered for a
// Service that is gone (Forget).
func (st *States) NewlyUnreachable(uid types.UID, names []string) []string {
	st.mu.Lock()
	defer st.mu.Unlock()
	var fresh []string
	for _, n := range names {
		if !slices.Contains(st.unreachable[uid], n) {
			fresh = append(fresh, n)
		}
	}
	if _, gone := st.goneAt[uid]; len(names) == 0 || gone {
		delete(st.unreachable, uid)
	} else {
		st.unreachable[uid] = slices.Clone(names)
	}
	return fresh
}
