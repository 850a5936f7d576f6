package router

import (
	"sync"
	"sync/atomic"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/svcstate"

	corev1 "k8s.io/api/core/v1"
)

// process is what the router keeps and runs for the process: the
// per-Service and per-Node state (svcstate.States) and the
// workers acting on it (the drain timer, the node-address re-sync, the
// forgetting of deleted Services). It is created once (NewReloadable, or
// New for a router used alone) and handed to every configuration's
// Router; a reload never rebuilds it. The workers run on the configuration
// in use when they pick a Service up (current).
type process struct {
	*svcstate.States

	// stopMu guards stop.
	stopMu sync.Mutex
	// drainTimer deletes drained load balancers when their drain ends,
	// once the informers are set (see drainqueue.go); nil without them.
	drainTimer atomic.Pointer[drainTimer]
	// serviceSync, when set, queues a Service for a full sync by the
	// controller serving it (see SetServiceSync).
	serviceSync atomic.Pointer[func(*corev1.Service) bool]
	drainOnce   sync.Once
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

func newProcess() *process { return &process{States: svcstate.New()} }

// setStop keeps the first stop channel the process was given.
func (st *process) setStop(stop <-chan struct{}) {
	st.stopMu.Lock()
	defer st.stopMu.Unlock()
	if st.stop == nil {
		st.stop = stop
	}
}

func (st *process) stopCh() <-chan struct{} {
	st.stopMu.Lock()
	defer st.stopMu.Unlock()
	return st.stop
}
