package router

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"k8s.io/controller-manager/pkg/healthz"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/backend"
)

// BackendStatus is one backend as the router sees it: its health and what
// it serves. The CCM publishes it for `multicloud-ccm status` (see package
// statuspublisher).
type BackendStatus struct {
	// Name and Type are the backend's, from the config.
	Name, Type string
	// Up is false once the backend's last calls in a row all failed to get
	// an answer from its cloud (see backend/health.go); the backend_up gauge.
	Up bool
	// LastSuccess is when a call last got an answer; zero before any.
	LastSuccess time.Time
	// LastError is the last call that got no answer (an outage, a timeout,
	// refused credentials), kept after the backend answers again; nil if
	// none failed.
	LastError *backend.CallError
	// Nodes and LoadBalancers count the Nodes and LoadBalancer Services the
	// backend serves (the label and annotation the router writes, read from
	// the informers' caches); nil when the backend has no instances, no
	// load balancers, or the informers are not set yet.
	Nodes, LoadBalancers *int
	// Pools is the usage of the backend's address pools, for a backend that
	// has them (backends.PoolReporter).
	Pools []backends.PoolUsage
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
		st.Up, st.LastSuccess, st.LastError = b.Health.State()
		if src != nil && b.Instances != nil {
			st.Nodes = ptrTo(nodes[b.Name])
		}
		if src != nil && b.LB != nil {
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

func ptrTo(n int) *int { return &n }

// BackendHealthChecker is the router's health check for the controller
// manager's /healthz: it fails, naming each, while any backend's cloud
// cannot be reached (its last calls in a row all failed), and passes again
// at its first answer. It is meant for readiness, not liveness: restarting
// the CCM does not bring a cloud back.
func (r *Router) BackendHealthChecker() healthz.UnnamedHealthChecker { return backendHealth{r: r} }

// backendHealth checks that every backend's cloud answers.
type backendHealth struct{ r *Router }

// Check fails while any backend is unreachable.
func (h backendHealth) Check(*http.Request) error {
	var down []string
	for _, b := range h.r.backends {
		if p := b.Health.Problem(); p != "" {
			down = append(down, fmt.Sprintf("backend %s: %s", b.Name, p))
		}
	}
	if len(down) == 0 {
		return nil
	}
	return errors.New(strings.Join(down, "; "))
}
