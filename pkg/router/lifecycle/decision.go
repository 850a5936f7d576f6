package lifecycle

import (
	"context"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// A Service's sync is one decision (issue 40): the backends that serve
// it, and for every backend that may hold its load balancer the step the
// router takes there; then the steps are carried out and the Service
// written. EnsureLoadBalancer records its decision as it makes it, in the
// Decision its context carries (WithDecision); Decide runs it under a dry
// run and returns it, which is what `plan` prints: the same code, so a
// plan and the switch cannot disagree on where a Service goes, what
// drains and what is deleted.

// StepKind is what the router does with a Service's load balancer in one
// backend.
type StepKind string

// The steps of a decision.
const (
	// StepEnsure: a target; its load balancer is created or updated.
	StepEnsure StepKind = "ensure"
	// StepDrain: no longer a target; its load balancer keeps serving until
	// the step's Until (a drain started now, or one under way), then is
	// deleted.
	StepDrain StepKind = "drain"
	// StepDelete: no longer a target, or a Service leaving us; its load
	// balancer is deleted now (Drained: at the end of its drain).
	StepDelete StepKind = "delete"
	// StepForget: recorded but holding nothing for the Service; it leaves
	// the record.
	StepForget StepKind = "forget"
	// StepUnreachable: recorded, but not configured (a reload removed
	// it); its load balancer there is left, and stays in the record, until
	// the backend is added back.
	StepUnreachable StepKind = "unreachable"
)

// Step is the router's step in one backend.
type Step struct {
	// Backend is the backend's name.
	Backend string
	// Kind is what is done there.
	Kind StepKind
	// Until is when a drain ends (StepDrain).
	Until time.Time
	// Drained marks a delete at the end of a drain.
	Drained bool
	// Err is the backend's failure (StepEnsure), if it failed.
	Err error
}

// Decision is what the router decided for one sync of a Service
// (EnsureLoadBalancer).
type Decision struct {
	// Targets are the backends that should serve the Service, in the
	// order its class or annotation lists them (or the default); none
	// when the router refused the Service or nothing routes it to us.
	Targets []string
	// HandedOver are the targets that leave the Service to another
	// controller (they answered ImplementedElsewhere).
	HandedOver []string
	// Elsewhere: no backend of ours serves the Service (the router
	// answered ImplementedElsewhere), after the steps taken.
	Elsewhere bool
	// Steps are the steps, in the order taken: the targets' ensures, then
	// what becomes of every other backend that may hold a load balancer.
	Steps []Step
	// Status is the status the Service should show; when the sync
	// failed, the one it shows all the same (some targets failing: the
	// others' addresses added, see partialFailure), nil when the failure
	// leaves the status as it is.
	Status *corev1.LoadBalancerStatus
	// Annotations are the changes (nil: removed) the sync makes to the
	// annotations naming who serves the Service (served-by, the load
	// balancers' IDs, the backends' written-back ones), and to the drains
	// and external-dns's target when a target serves again, computed from
	// the copy the sync was handed (servedChanges; the controller writing
	// them computes them again from the version it writes). The record
	// and a drain's start are written during the call (Steps). Empty when
	// the sync failed before.
	Annotations map[annotation.Name]*string
	// Err is the sync's error.
	Err error

	// served returns the write EnsureLoadBalancer left to the caller
	// (ForWrite), nil when none.
	served func() *ServedWrite

	// handed are the nodes the call handed each backend, by name (see
	// hand).
	handed map[string]handedNodes

	mu sync.Mutex
}

type decisionKey struct{}

// WithDecision returns a context under which EnsureLoadBalancer records
// its decision in the Decision returned.
func WithDecision(ctx context.Context) (context.Context, *Decision) {
	d := &Decision{}
	return context.WithValue(ctx, decisionKey{}, d), d
}

// decisionOf is the Decision ctx carries; nil (which records nothing)
// when none.
func decisionOf(ctx context.Context) *Decision {
	d, _ := ctx.Value(decisionKey{}).(*Decision)
	return d
}

// Decide returns the router's decision for a sync of the Service with
// these nodes, under a dry run (backends.WithDryRun: each backend records
// its mutating calls instead of making them). A router that was never
// initialised writes nothing to the API server; one that was would, so
// Decide is for a router built for planning (pkg/plan).
func (r *Balancer) Decide(ctx context.Context, clusterName string, service *corev1.Service, nodes []*corev1.Node) *Decision {
	ctx, d := WithDecision(ctx)
	ctx, _ = backends.WithDryRun(ctx)
	st, err := r.EnsureLoadBalancer(ctx, clusterName, service.DeepCopy(), nodes)
	d.End(st, err)
	return d
}

// ForWrite returns a context under which EnsureLoadBalancer records its
// decision in the Decision returned, as under WithDecision, and leaves
// the Service's write to the caller (DeferServedAnnotations): the
// decision carries it. The caller ends the decision with the call's
// answer (End) and writes the Service once, from the decision alone: its
// Status, and the annotation changes Changes computes from the version
// written. Decide is the same decision under a dry run: what `plan`
// prints is what the controller writes.
func ForWrite(ctx context.Context) (context.Context, *Decision) {
	ctx, d := WithDecision(ctx)
	ctx, served := DeferServedAnnotations(ctx)
	d.served = served
	return ctx, d
}

// End records EnsureLoadBalancer's answer in the decision: the status the
// Service should show (kept from a partial failure when the call returned
// none) and the error.
func (d *Decision) End(st *corev1.LoadBalancerStatus, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err == nil || st != nil {
		d.Status = st
	}
	d.Err = err
}

// Write returns the write the decision leaves to the caller (ForWrite):
// nil when none (no ForWrite, a failed sync, a Service no backend
// serves, a router without a client).
func (d *Decision) Write() *ServedWrite {
	if d == nil || d.served == nil {
		return nil
	}
	return d.served()
}

// Changes returns the annotation changes (nil values remove one) that
// make cur, the Service as the controller's write will find it (its
// resourceVersion guards the write), say what the sync decided: the
// decision's Annotations computed again from cur (ServedWrite.Changes),
// so a write the router made during the call is never undone. None when
// the decision leaves no write.
func (d *Decision) Changes(cur *corev1.Service) map[string]*string {
	return d.Write().Changes(cur)
}

// Written tells the router that changes (from Changes) were written (see
// ServedWrite.Written).
func (d *Decision) Written(changes map[string]*string) {
	d.Write().Written(changes)
}

// Backends names the backends with a step of one of kinds, in order,
// each once.
func (d *Decision) Backends(kinds ...StepKind) []string {
	var out []string
	for _, s := range d.Steps {
		if slices.Contains(kinds, s.Kind) && !slices.Contains(out, s.Backend) {
			out = append(out, s.Backend)
		}
	}
	return out
}

func (d *Decision) setTargets(names []string) {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.Targets = slices.Clone(names)
}

func (d *Decision) step(s Step) {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.Steps = append(d.Steps, s)
}

// show records the status a failed sync shows all the same.
func (d *Decision) show(st *corev1.LoadBalancerStatus) {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.Status = st
}

func (d *Decision) handOver(names []string) {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.HandedOver = slices.Clone(names)
}

func (d *Decision) elsewhere() {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.Elsewhere = true
}

func (d *Decision) annotate(changes map[annotation.Name]*string) {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.Annotations == nil {
		d.Annotations = map[annotation.Name]*string{}
	}
	for k, v := range changes {
		d.Annotations[k] = v
	}
}
