package router

import (
	"time"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// maxErrorMessage bounds the message of a CallError: the status is for
// reading at a glance, the log has the rest.
const maxErrorMessage = 1000

// BackendStatus is one backend as the router sees it: its health and what
// it serves. The CCM publishes it for `multicloud-ccm status` (see package
// statuspublisher).
type BackendStatus struct {
	// Name and Type are the backend's, from the config.
	Name, Type string
	// Up is false once the backend's last calls in a row all failed to get
	// an answer from its cloud (see health.go); the backend_up gauge.
	Up bool
	// LastSuccess is when a call last got an answer; zero before any.
	LastSuccess time.Time
	// LastError is the last call that got no answer (an outage, a timeout,
	// refused credentials), kept after the backend answers again; nil if
	// none failed.
	LastError *CallError
	// Nodes and LoadBalancers count the Nodes and LoadBalancer Services the
	// backend serves (the label and annotation the router writes, read from
	// the informers' caches); nil when the backend has no instances, no
	// load balancers, or the informers are not set yet.
	Nodes, LoadBalancers *int
	// Pools is the usage of the backend's address pools, for a backend that
	// has them (backends.PoolReporter).
	Pools []backends.PoolUsage
}

// CallError is a failed backend call.
type CallError struct {
	// Operation is the call (InstanceExists, EnsureLoadBalancer, ...).
	Operation string
	// Class is the error's class, as the errors metric counts it:
	// throttled, auth, not_found or other.
	Class string
	// Message is the error, shortened to maxErrorMessage bytes.
	Message string
	// Time is when the call ended.
	Time time.Time
}

func newCallError(op operation, err error, at time.Time) *CallError {
	msg := err.Error()
	if len(msg) > maxErrorMessage {
		msg = msg[:maxErrorMessage] + "…"
	}
	return &CallError{Operation: op.String(), Class: classify(err).String(), Message: msg, Time: at}
}

// BackendStatus returns every backend's status, in config order. It makes
// no cloud or API call.
func (r *Router) BackendStatus() []BackendStatus {
	var nodes, lbs map[string]int
	src := r.served.Load()
	if src != nil {
		nodes, lbs = src.count()
	}
	out := make([]BackendStatus, 0, len(r.backends))
	for _, b := range r.backends {
		st := BackendStatus{Name: b.Name, Type: b.Type}
		st.Up, st.LastSuccess, st.LastError = b.health.state()
		if src != nil && b.instances != nil {
			st.Nodes = ptrTo(nodes[b.Name])
		}
		if src != nil && b.lb != nil {
			st.LoadBalancers = ptrTo(lbs[b.Name])
		}
		if p, ok := b.Cloud.(backends.PoolReporter); ok {
			st.Pools = p.PoolUsage()
		}
		out = append(out, st)
	}
	return out
}

// BackendStatus returns the status of the backends of the configuration in
// use.
func (rl *Reloadable) BackendStatus() []BackendStatus {
	g := rl.acquire()
	defer g.release()
	return g.r.BackendStatus()
}

// state returns whether the backend is up, its last answer's time and its
// last failure.
func (h *health) state() (up bool, lastOK time.Time, lastFailure *CallError) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var failure *CallError
	if h.lastFailure != nil {
		c := *h.lastFailure
		failure = &c
	}
	return h.failures < unreachableAfter, h.lastOK, failure
}

func ptrTo(n int) *int { return &n }
