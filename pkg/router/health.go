package router

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/api"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/controller-manager/pkg/healthz"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// unreachableAfter is how many calls in a row must fail to reach a
// backend's cloud before the backend counts as unreachable: one failed call
// is noise, three are an outage or wrong credentials.
const unreachableAfter = 3

var (
	backendUp = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace:      "multicloud_ccm",
		Subsystem:      "backend",
		Name:           "up",
		Help:           "1 while the backend's cloud answers the router's calls, 0 once the last calls in a row all failed to reach it.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"backend"})

	registerHealthOnce sync.Once
)

// health is whether a backend's cloud answers: every call's outcome moves
// it. An answer the user can act on (a UserError, a not-found, an instance
// or load balancer still provisioning, a Service served elsewhere) is an
// answer; an outage, a timeout or refused credentials is not.
type health struct {
	up metrics.GaugeMetric

	mu       sync.Mutex
	failures int
	since    time.Time
	lastErr  error
	// lastOK is when a call last got an answer; lastFailure the last call
	// that did not, kept after the backend answers again.
	lastOK      time.Time
	lastFailure *CallError
}

func newHealth(backend string) *health {
	registerHealthOnce.Do(func() { legacyregistry.MustRegister(backendUp) })
	h := &health{up: backendUp.WithLabelValues(backend)}
	h.up.Set(1)
	return h
}

// forgetHealth deletes the backend_up series of backends a reload removed,
// so an alert on one clears. A call still in flight on a removed backend
// sets its detached gauge, which is no longer exported.
func forgetHealth(removed []string) {
	for _, name := range removed {
		backendUp.DeleteLabelValues(name)
	}
}

// observe records the outcome of one call of operation op.
func (h *health) observe(ctx context.Context, op operation, err error) {
	if ctx.Err() != nil {
		return // the caller gave up: that says nothing about the cloud
	}
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	if answered(err) {
		h.failures, h.lastErr, h.lastOK = 0, nil, now
		h.up.Set(1)
		return
	}
	if h.failures == 0 {
		h.since = now
	}
	h.failures++
	h.lastErr = err
	h.lastFailure = newCallError(op, err, now)
	if h.failures >= unreachableAfter {
		h.up.Set(0)
	}
}

// answered reports whether a call ending with err reached the cloud and
// got an answer.
func answered(err error) bool {
	if err == nil || err == cloudprovider.ImplementedElsewhere { //nolint:errorlint // upstream sentinel, never wrapped.
		return true
	}
	return answeredWithError(err)
}

// answeredWithError is answered for a non-nil err: apart so that a
// successful call does not allocate the RetryError target.
func answeredWithError(err error) bool {
	var retry *api.RetryError
	if errors.Is(err, cloudprovider.InstanceNotFound) || errors.As(err, &retry) {
		return true
	}
	if classify(err) == classAuth {
		return false // refused credentials, even reported as the user's to fix
	}
	_, user := backends.AsUserError(err)
	return user
}

// problem describes the backend as unreachable, or returns "".
func (h *health) problem() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.failures < unreachableAfter {
		return ""
	}
	return fmt.Sprintf("%d calls in a row failed since %s, the last: %v", h.failures, h.since.UTC().Format(time.RFC3339), h.lastErr)
}

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
		if p := b.health.problem(); p != "" {
			down = append(down, fmt.Sprintf("backend %s: %s", b.Name, p))
		}
	}
	if len(down) == 0 {
		return nil
	}
	return errors.New(strings.Join(down, "; "))
}
