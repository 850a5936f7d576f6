package router

import (
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// What lives for the process and what for a configuration
// (docs/routing.md, DESIGN.md contract 12):
//
//	 process (serviceStates, one for the Reloadable)      configuration (Router, one per generation)
//	+---------------------------------------------+     +------------------------------------------+
//	| per Service, by UID:                        |     | backends (clients, caches, health)       |
//	|   lock          serialises every LB call    |<----| node rules, classes, defaultBackend      |
//	|   deletion mark  no re-create after delete  |     | served counts (served.go)                |
//	|   record         what this process wrote    |     |                                          |
//	| node-address re-sync queue + pending retries|     +------------------------------------------+
//	| drain timer, draining records written       |
//	| problems logged once, cluster name          |        ^ Apply swaps this box only; a call in
//	+---------------------------------------------+        | flight finishes on the one it began on,
//	      ^ shared by every generation's Router            | under the same per-Service lock.
//
// A call that began on a retired configuration and one on the new one take
// the same lock, see the same deletion marks and records, and a re-sync
// queued under one is carried out under the next: the queue's workers run
// on the configuration in use when they pick the Service up.

// serviceStates is the router's per-Service and per-Node state. It is
// created once for the process (NewReloadable, or New for a router used
// alone) and handed to every configuration's Router; a reload never
// rebuilds it.
type serviceStates struct {
	mu sync.Mutex
	// recorded holds, per Service UID, the load-balancer record this
	// process last wrote (see lbrecord.go); Services with an empty record
	// have no entry, and entries go when their Service does.
	recorded map[types.UID][]string
	// deleted holds, per Service UID, when the router finished deleting the
	// load balancer of that Service while it was being deleted (see
	// markDeleted).
	deleted map[types.UID]time.Time
	// locks serialises load-balancer calls per Service UID.
	locks map[types.UID]*svcLock
	// goneAt holds when a Service was seen deleted while its record here
	// still named a backend: the record is kept deletedFor longer, for a
	// delete still to come with an older copy of the Service.
	goneAt map[types.UID]time.Time
	// drains holds, per Service UID, the draining record this process
	// last wrote (see drain.go); the Service's annotation is the truth
	// across restarts.
	drains map[types.UID]drainRecord
	// shown holds, per Service UID and backend, the addresses that
	// backend's last answer gave the Service (see shown.go).
	shown map[types.UID]map[string][]string
	// drainTimer deletes drained load balancers when their drain ends,
	// once the informers are set (see drainqueue.go); nil without them.
	drainTimer atomic.Pointer[drainTimer]
	// serviceSync, when set, queues a Service for a full sync by the
	// controller serving it (see SetServiceSync).
	serviceSync atomic.Pointer[func(*corev1.Service) bool]
	drainOnce   sync.Once

	// clusterName is the last cluster name the service controller passed.
	clusterName atomic.Value
	// problems keeps each object's last reported problem, to log it once.
	problems problems
	// labelRefusedUntil is when the router next tries to write a node's
	// platform label after the API server refused one (Forbidden: its
	// identity may not patch nodes), in Unix nanoseconds; 0 when none was
	// refused. See labelPlatform.
	labelRefusedUntil atomic.Int64

	// current returns the configuration's router in use and a function
	// ending its use; the node-address re-sync runs on it.
	current func() (*Router, func())
	// stop ends the process's workers (the node-address re-sync).
	stop <-chan struct{}
	// resync is the node-address re-sync, once the informers are set (see
	// nodesync.go); nil without them.
	resync     atomic.Pointer[addressResync]
	resyncOnce sync.Once
	forgetOnce sync.Once
}

func newServiceStates() *serviceStates {
	return &serviceStates{
		recorded: map[types.UID][]string{},
		deleted:  map[types.UID]time.Time{},
		locks:    map[types.UID]*svcLock{},
		goneAt:   map[types.UID]time.Time{},
		drains:   map[types.UID]drainRecord{},
		shown:    map[types.UID]map[string][]string{},
	}
}

// setStop keeps the first stop channel the process was given.
func (st *serviceStates) setStop(stop <-chan struct{}) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.stop == nil {
		st.stop = stop
	}
}

func (st *serviceStates) stopCh() <-chan struct{} {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.stop
}

// lock serialises the load-balancer calls for one Service, whatever
// configuration serves them. It returns the unlock function.
func (st *serviceStates) lock(uid types.UID) func() {
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

// markDeleted remembers that the load balancer of the Service with uid is
// gone with the Service, dropping marks older than deletedFor.
func (st *serviceStates) markDeleted(uid types.UID) {
	st.mu.Lock()
	defer st.mu.Unlock()
	now := time.Now()
	for u, at := range st.deleted {
		if now.Sub(at) > deletedFor {
			delete(st.deleted, u)
		}
	}
	st.deleted[uid] = now
}

// wasDeleted reports whether markDeleted saw the Service's UID recently.
func (st *serviceStates) wasDeleted(uid types.UID) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	at, ok := st.deleted[uid]
	return ok && time.Since(at) <= deletedFor
}

// recordedOf returns what this process last wrote as the Service's record.
func (st *serviceStates) recordedOf(uid types.UID) ([]string, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	mem, ok := st.recorded[uid]
	return mem, ok
}

func (st *serviceStates) remember(uid types.UID, names []string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if _, gone := st.goneAt[uid]; gone && len(names) == 0 {
		delete(st.recorded, uid)
		delete(st.goneAt, uid)
		return
	}
	st.recorded[uid] = names
}

// forget drops the record of a Service that is gone. A record still naming
// a backend is kept deletedFor longer: the Service went without the
// router's delete (its finalizer removed by hand, or no finalizer), and a
// delete with a copy of the Service older than the record may still come;
// it must reach every backend this process recorded.
func (st *serviceStates) forget(uid types.UID) {
	st.mu.Lock()
	defer st.mu.Unlock()
	now := time.Now()
	for u, at := range st.goneAt {
		if now.Sub(at) > deletedFor {
			delete(st.recorded, u)
			delete(st.goneAt, u)
		}
	}
	delete(st.drains, uid)
	delete(st.shown, uid)
	if len(st.recorded[uid]) == 0 {
		delete(st.recorded, uid)
		delete(st.goneAt, uid)
		return
	}
	if _, ok := st.goneAt[uid]; !ok {
		st.goneAt[uid] = now
	}
}

// drainsOf returns the draining record this process last wrote for the
// Service, if any.
func (st *serviceStates) drainsOf(uid types.UID) (drainRecord, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	d, ok := st.drains[uid]
	return d, ok
}

// setDrains remembers the draining record written for the Service; an
// empty one is forgotten.
func (st *serviceStates) setDrains(uid types.UID, d drainRecord) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(d) == 0 {
		delete(st.drains, uid)
		return
	}
	st.drains[uid] = d
}

// size counts the entries kept, for tests of their bound.
func (st *serviceStates) size() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return len(st.recorded) + len(st.locks) + len(st.drains) + len(st.shown)
}

// shownOf returns, per backend, the addresses its last answer gave the
// Service.
func (st *serviceStates) shownOf(uid types.UID) (map[string][]string, bool) {
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

// setShown remembers the addresses backend's answer gave the Service.
func (st *serviceStates) setShown(uid types.UID, backend string, keys []string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	m, ok := st.shown[uid]
	if !ok {
		m = map[string][]string{}
		st.shown[uid] = m
	}
	m[backend] = keys
}
