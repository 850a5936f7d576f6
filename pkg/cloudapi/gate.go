package cloudapi

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

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
