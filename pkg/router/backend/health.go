package backend

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/api"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// UnreachableAfter is how many calls in a row must fail to reach a
// backend's cloud before the backend counts as unreachable: one failed call
// is noise, three are an outage or wrong credentials.
const UnreachableAfter = 3

// BackendUp and the other health series, registered by RegisterMetrics.
var (
	BackendUp = metrics.NewGaugeVec(&metrics.GaugeOpts{
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

// NewHealth returns the health of the named backend, reachable until calls fail.
func NewHealth(backend string) *health {
	registerHealthOnce.Do(func() { legacyregistry.MustRegister(BackendUp) })
	h := &health{up: BackendUp.WithLabelValues(backend)}
	h.up.Set(1)
	return h
}

// ForgetHealth deletes the backend_up series of backends a reload removed,
// so an alert on one clears. A call still in flight on a removed backend
// sets its detached gauge, which is no longer exported.
func ForgetHealth(removed []string) {
	for _, name := range removed {
		BackendUp.DeleteLabelValues(name)
	}
}

// Observe records the outcome of one call of operation op.
func (h *health) Observe(ctx context.Context, op operation, err error) {
	if ctx.Err() != nil || backends.Refused(err) {
		return // the caller gave up, or this replica refused the call itself: that says nothing about the cloud
	}
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	if Answered(err) {
		h.failures, h.lastErr, h.lastOK = 0, nil, now
		h.up.Set(1)
		return
	}
	if h.failures == 0 {
		h.since = now
	}
	h.failures++
	h.lastErr = err
	h.lastFailure = NewCallError(op, err, now)
	if h.failures >= UnreachableAfter {
		h.up.Set(0)
	}
}

// Answered reports whether a call ending with err reached the cloud and
// got an answer.
func Answered(err error) bool {
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
	if Classify(err) == ClassAuth {
		return false // refused credentials, even reported as the user's to fix
	}
	_, user := backends.AsUserError(err)
	return user
}

// Problem describes the backend as unreachable, or returns "".
func (h *health) Problem() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.failures < UnreachableAfter {
		return ""
	}
	return fmt.Sprintf("%d calls in a row failed since %s, the last: %v", h.failures, h.since.UTC().Format(time.RFC3339), h.lastErr)
}

// MaxErrorMessage bounds the message of a CallError: the status is for
// reading at a glance, the log has the rest.
const MaxErrorMessage = 1000

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

// NewCallError describes a call of op that failed with err at a time: its class and its message, cut at MaxErrorMessage.
func NewCallError(op operation, err error, at time.Time) *CallError {
	msg := err.Error()
	if len(msg) > MaxErrorMessage {
		msg = msg[:MaxErrorMessage] + "…"
	}
	return &CallError{Operation: op.String(), Class: Classify(err).String(), Message: msg, Time: at}
}

// State returns whether the backend is up, its last answer's time and its
// last failure.
func (h *health) State() (up bool, lastOK time.Time, lastFailure *CallError) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var failure *CallError
	if h.lastFailure != nil {
		c := *h.lastFailure
		failure = &c
	}
	return h.failures < UnreachableAfter, h.lastOK, failure
}
