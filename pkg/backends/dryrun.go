package backends

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"k8s.io/klog/v2"
)

// Intent is one mutating call a backend would have made under a dry run
// (WithDryRun), and did not.
type Intent struct {
	// Call names the cloud call ("elasticloadbalancing:CreateListener",
	// "octavia: PUT listener", "allocate address") as an operator would
	// search for it in the cloud's audit log.
	Call string `json:"call"`
	// What says what it would change, in the words of a change report
	// ("listener TCP:80 created", "target i-0abc:30080 registered").
	What string `json:"what"`
	// Kind says what the call means for the Service's load balancer as a
	// whole; IntentChange for a change to one that stays.
	Kind IntentKind `json:"kind,omitempty"`
}

// IntentKind classifies an Intent.
type IntentKind string

// The kinds of Intent.
const (
	// IntentChange changes a part of a load balancer that stays.
	IntentChange IntentKind = ""
	// IntentCreate creates the Service's load balancer (or assigns its
	// first address) where there was none.
	IntentCreate IntentKind = "create"
	// IntentReplace makes the Service's load balancer again, or gives it
	// another address: its clients see a new address or DNS name.
	IntentReplace IntentKind = "replace"
	// IntentAdopt takes over, in place, a load balancer the cloud's
	// upstream CCM made (tagging it as this Service's).
	IntentAdopt IntentKind = "adopt"
	// IntentDelete deletes the Service's load balancer.
	IntentDelete IntentKind = "delete"
)

// ErrMutationInDryRun is returned by a backend's transport guard when a
// mutating call reaches the cloud's SDK under a dry run: a bug in the
// backend's read-only mode, never something to retry.
var ErrMutationInDryRun = errors.New("mutating cloud call refused: this is a dry run (multicloud-ccm plan)")

type dryRunKey struct{}

// dryRun collects the intents of one dry run.
type dryRun struct {
	mu      sync.Mutex
	intents []Intent
	// state is what the backends made up for the rest of the run
	// (DryRunState), shared with the dry runs nested in it; own is this
	// run's alone (DryRunOwnState).
	state, own *sync.Map
}

// WithDryRun returns a ctx under which a backend's EnsureLoadBalancer,
// UpdateLoadBalancer and EnsureLoadBalancerDeleted make no mutating call
// and write nothing to the API server: every mutation the reconcile decides
// is recorded (RecordIntent) instead of made, and the reconcile goes on as
// if it had been made, so every change is listed, in the order the real
// call would make them. The returned function gives the intents recorded so
// far. Reads go to the cloud as usual.
//
// Each backend also refuses, at its SDK's transport, any mutating call
// made under such a ctx (RefuseInDryRun): a mutation that slips past the
// read-only mode fails loudly instead of changing the cloud.
func WithDryRun(ctx context.Context) (context.Context, func() []Intent) {
	d := &dryRun{state: &sync.Map{}, own: &sync.Map{}}
	if parent, ok := ctx.Value(dryRunKey{}).(*dryRun); ok {
		// A step of an enclosing run (a plan's Service, then each backend
		// call in it) sees what the run's earlier steps made up.
		d.state = parent.state
	}
	return context.WithValue(ctx, dryRunKey{}, d), func() []Intent {
		d.mu.Lock()
		defer d.mu.Unlock()
		return append([]Intent(nil), d.intents...)
	}
}

type carryOnKey struct{}

// WithCarryOn marks the dry runs under ctx as steps of one plan that goes
// on from Service to Service (pkg/plan). A backend whose automatic choices
// follow from its own earlier ones (bare metal's pool cursors: it hands
// out the next free address after the last it gave) lets each such dry
// run move them on, as each sync of the switch would, so that the next
// Service planned is given what the switch would give it. A lone dry run
// (the router's own, in a running CCM) leaves them where they were.
func WithCarryOn(ctx context.Context) context.Context {
	return context.WithValue(ctx, carryOnKey{}, true)
}

// CarriesOn reports whether ctx's dry runs are steps of one plan
// (WithCarryOn).
func CarriesOn(ctx context.Context) bool {
	v, _ := ctx.Value(carryOnKey{}).(bool)
	return v
}

// DryRun reports whether ctx is a dry run's (WithDryRun).
func DryRun(ctx context.Context) bool {
	_, ok := ctx.Value(dryRunKey{}).(*dryRun)
	return ok
}

// DryRunState returns the store of ctx's dry run (nil outside one): what
// a backend's read-only mode made up for later calls of the same run to
// see, as the real run would have made it. Dry runs nested in one (a
// plan's per-Service run, the router's decision in it, each backend call)
// share the outermost's. It lives as long as the outermost run; keep no
// reference to the run in it.
func DryRunState(ctx context.Context) *sync.Map {
	if d, ok := ctx.Value(dryRunKey{}).(*dryRun); ok {
		return d.state
	}
	return nil
}

// DryRunOwnState is DryRunState for the innermost dry run alone (nil
// outside one): what one backend call made up for its own later steps (a
// plan's per-call run), which the next call of the plan, as its real
// counterpart, does not see.
func DryRunOwnState(ctx context.Context) *sync.Map {
	if d, ok := ctx.Value(dryRunKey{}).(*dryRun); ok {
		return d.own
	}
	return nil
}

// RecordIntent records, under a dry run, a mutating call the backend
// decided and did not make. Outside a dry run it does nothing.
func RecordIntent(ctx context.Context, call, what string) {
	RecordIntentOf(ctx, IntentChange, call, what)
}

// RecordIntentOf is RecordIntent for a call of the given kind.
func RecordIntentOf(ctx context.Context, kind IntentKind, call, what string) {
	d, ok := ctx.Value(dryRunKey{}).(*dryRun)
	if !ok {
		return
	}
	d.mu.Lock()
	d.intents = append(d.intents, Intent{Call: call, What: what, Kind: kind})
	d.mu.Unlock()
	klog.FromContext(ctx).V(4).Info("Dry run: not calling", "call", call, "what", what)
}

// RefuseInDryRun is a backend's transport guard: under a dry run it
// returns ErrMutationInDryRun, naming call, and logs it as an error (a
// mutation slipped past the backend's read-only mode); otherwise nil.
// Call it with the ctx of every SDK request that is not a read.
func RefuseInDryRun(ctx context.Context, call string) error {
	if !DryRun(ctx) {
		return nil
	}
	err := fmt.Errorf("%s: %w", call, ErrMutationInDryRun)
	klog.FromContext(ctx).Error(err, "BUG: a mutating call reached the cloud's SDK in a dry run")
	return err
}

// ReadOnlyAction reports whether an API action named in the AWS and
// OpenStack style only reads: Describe*, Get*, List*.
func ReadOnlyAction(action string) bool {
	for _, p := range []string{"Describe", "Get", "List"} {
		if strings.HasPrefix(action, p) {
			return true
		}
	}
	return false
}
