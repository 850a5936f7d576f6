package cloudapi

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/multicloud-ccm/multicloud-ccm/internal/metric"
)

// ErrMutationRefused is the error (check with errors.Is) of a mutating
// cloud call the mutation gate refused: nothing was sent to the cloud. It
// says nothing about the cloud's health, and a create it refused was not
// made (a backend must not wait for it to land).
var ErrMutationRefused = errors.New("mutating cloud call refused: this replica cannot be sure it still leads")

// MutationGate decides, just before a mutating cloud call is sent, whether
// it may be: nil lets it through, an error refuses it (Budget.Wait wraps
// the error with ErrMutationRefused). It must not block and is called
// from many goroutines.
type MutationGate func(ctx context.Context) error

// gate is the process's mutation gate. It is process-wide, not per
// Budget: every backend of the process, and every configuration of it a
// reload builds, writes to its cloud for the one leader-election lease the
// process holds or not. Its one owner is the program's main
// (cmd/multicloud-ccm sets it from the leader-election fence before any
// backend is built); tests that set it restore it when they end and do
// not run in parallel with other tests of the gate.
var gate atomic.Pointer[MutationGate]

// SetMutationGate installs g as the process's mutation gate (nil: none,
// every mutation passes) and returns the one it replaces.
func SetMutationGate(g MutationGate) MutationGate {
	var old *MutationGate
	if g == nil {
		old = gate.Swap(nil)
	} else {
		old = gate.Swap(&g)
	}
	if old == nil {
		return nil
	}
	return *old
}

var refusedCloudCalls = metric.CounterVec("fence", "refused_cloud_calls_total",
	"Mutating cloud calls the leader-election fence refused before they were sent, because this replica could not be sure it still held the lease, by backend and api.",
	"backend", "api")

// checkGate asks the process's gate whether a mutation of api by backend
// may be sent now; a refusal is counted and returned wrapping
// ErrMutationRefused.
func checkGate(ctx context.Context, backend, api string) error {
	g := gate.Load()
	if g == nil {
		return nil
	}
	err := (*g)(ctx)
	if err == nil {
		return nil
	}
	refusedCloudCalls.WithLabelValues(backend, api).Inc()
	if errors.Is(err, ErrMutationRefused) {
		return fmt.Errorf("backend %q, %s API: %w", backend, api, err)
	}
	return fmt.Errorf("backend %q, %s API: %w: %w", backend, api, ErrMutationRefused, err)
}

// takeover is the process's takeover clock (SetTakeover).
var takeover atomic.Pointer[func() time.Time]

// SetTakeover installs f as the process's takeover clock and returns the
// one it replaces (nil: none). f returns when this replica took the
// leader-election lease over from a previous leader, while it leads (zero
// otherwise). Its one owner is the program's main, beside the mutation
// gate (cmd/multicloud-ccm sets it from the leader-election fence).
func SetTakeover(f func() time.Time) func() time.Time {
	var old *func() time.Time
	if f == nil {
		old = takeover.Swap(nil)
	} else {
		old = takeover.Swap(&f)
	}
	if old == nil {
		return nil
	}
	return *old
}

// LandingAfterTakeover returns until when a cloud change the previous
// leader made may still land: the takeover plus window, when that is still
// ahead (zero otherwise, and without a takeover clock). The previous
// leader's mutations all passed its gate before its hold of the lease
// ended, so before this replica took over; the gate is a check, not a
// deadline, so each was sent (or given up) within its client's request
// timeout of that check, and may land some time after. window must cover
// both: a backend passes its request timeout plus the time it gives a
// create of its own whose answer was lost. A backend whose create takes
// no idempotency key (Octavia's) treats a load balancer it does not find
// as one that may still appear until then.
func LandingAfterTakeover(window time.Duration) time.Time {
	f := takeover.Load()
	if f == nil {
		return time.Time{}
	}
	since := (*f)()
	if since.IsZero() {
		return time.Time{}
	}
	until := since.Add(window)
	if !time.Now().Before(until) {
		return time.Time{}
	}
	return until
}
