package lbcontroller

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
)

// The Service's status.conditions the controller writes (docs/routing.md,
// "Service conditions"), in the same request as its load-balancer status:
// they live in the API server, and the controller is their one writer.
// Conditions of other types (other controllers') are left as they are.
const (
	// ConditionReady is whether the Service's load balancer is ready:
	// True once an ensure succeeded and its addresses are in the status,
	// False with the reason of the last failure while it fails.
	ConditionReady = "LoadBalancerReady"
	// ConditionBackendPrefix + a backend's name is whether the Service's
	// load balancer in that backend serves (True, reason Serving) or
	// drains (False, reason Draining, until the time the message gives);
	// one per backend the Service's record names. `kubectl wait
	// --for=condition=backend.multicloud-ccm.io/aws-1 svc/web`.
	ConditionBackendPrefix = "backend.multicloud-ccm.io/"

	reasonReady       = "Ensured"
	reasonNotReady    = "SyncLoadBalancerFailed"
	reasonPending     = "Pending"
	reasonServing     = "Serving"
	reasonDrainingLB  = "Draining"
	conditionsMessage = "Load balancer ready"
)

// ours reports whether a condition is one the controller wrote: a
// backend condition, or LoadBalancerReady with one of our reasons (a
// controller of another class may use that type too; its condition is
// never removed).
func ours(c metav1.Condition) bool {
	if strings.HasPrefix(c.Type, ConditionBackendPrefix) {
		return true
	}
	return c.Type == ConditionReady && (c.Reason == reasonReady || c.Reason == reasonNotReady || c.Reason == reasonPending)
}

// servedConditions returns the Service's conditions once its load
// balancer was ensured and ann (the router's served annotations, nil
// removing one) written on cur: ready, and per backend of its record
// serving or draining. changed reports whether they differ from cur's.
func servedConditions(cur *corev1.Service, ann map[string]*string, status *corev1.LoadBalancerStatus) (out []metav1.Condition, changed bool) {
	get := func(name annotation.Name) string {
		if v, ok := ann[string(name)]; ok {
			if v == nil {
				return ""
			}
			return *v
		}
		return cur.Annotations[string(name)]
	}
	draining := map[string]string{}
	for e := range strings.SplitSeq(get(annotation.LoadBalancerDraining), ",") {
		if name, at, ok := strings.Cut(strings.TrimSpace(e), "="); ok {
			draining[strings.TrimSpace(name)] = strings.TrimSpace(at)
		}
	}
	var serving []string
	want := map[string]metav1.Condition{}
	for b := range strings.SplitSeq(get(annotation.LoadBalancerBackends), ",") {
		if b = strings.TrimSpace(b); b == "" {
			continue
		}
		c := metav1.Condition{Type: ConditionBackendPrefix + b, Status: metav1.ConditionTrue, Reason: reasonServing,
			Message: fmt.Sprintf("The load balancer in backend %q serves the Service", b)}
		if at, ok := draining[b]; ok {
			c.Status, c.Reason = metav1.ConditionFalse, reasonDrainingLB
			c.Message = fmt.Sprintf("The load balancer in backend %q drains until %s: its addresses left the Service's status (or its DNS target); it is deleted then", b, at)
		} else {
			serving = append(serving, b)
		}
		want[c.Type] = c
	}
	ready := metav1.Condition{Type: ConditionReady, Status: metav1.ConditionTrue, Reason: reasonReady, Message: conditionsMessage}
	switch len(serving) {
	case 0:
	case 1:
		ready.Message += " in backend " + serving[0]
	default:
		ready.Message += " in backends " + strings.Join(serving, ", ")
	}
	if len(status.Ingress) == 0 {
		// Ensured, but no address yet (a cloud still provisioning it):
		// not ready for clients.
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, reasonPending, "The load balancer was ensured but has no address yet"
	}
	want[ready.Type] = ready
	return setConditions(cur, want)
}

// backendConditionsStale reports whether the Service's backend
// conditions disagree with its record and draining annotations as the API
// server has them: a backend condition for a backend the record no longer
// names (its drain ended and the router dropped it), or one draining that
// no longer drains, or serving that now drains. The router writes those
// annotations outside the controller's syncs (a drain's end, from its
// timer); the update that carries them is not a reason to ensure, but the
// conditions are the controller's to rewrite. A Service without a
// backend condition of ours is never stale: nothing of ours to rewrite.
func backendConditionsStale(svc *corev1.Service) bool {
	recorded := map[string]bool{}
	for b := range strings.SplitSeq(svc.Annotations[string(annotation.LoadBalancerBackends)], ",") {
		if b = strings.TrimSpace(b); b != "" {
			recorded[b] = true
		}
	}
	draining := map[string]bool{}
	for e := range strings.SplitSeq(svc.Annotations[string(annotation.LoadBalancerDraining)], ",") {
		if name, _, ok := strings.Cut(strings.TrimSpace(e), "="); ok {
			draining[strings.TrimSpace(name)] = true
		}
	}
	for _, c := range svc.Status.Conditions {
		b, ok := strings.CutPrefix(c.Type, ConditionBackendPrefix)
		if !ok {
			continue
		}
		if !recorded[b] || (c.Reason == reasonDrainingLB) != draining[b] {
			return true
		}
	}
	return false
}

// failedConditions returns the Service's conditions after a failed sync:
// LoadBalancerReady False with the error, the per-backend ones kept.
// changed is false when the condition already says it failed (its message
// is not rewritten on every retry).
func failedConditions(cur *corev1.Service, err error) (out []metav1.Condition, changed bool) {
	if c := meta.FindStatusCondition(cur.Status.Conditions, ConditionReady); c != nil && c.Status == metav1.ConditionFalse && c.Reason == reasonNotReady {
		return cur.Status.Conditions, false
	}
	want := map[string]metav1.Condition{}
	for _, c := range cur.Status.Conditions {
		if strings.HasPrefix(c.Type, ConditionBackendPrefix) {
			want[c.Type] = c
		}
	}
	want[ConditionReady] = metav1.Condition{Type: ConditionReady, Status: metav1.ConditionFalse, Reason: reasonNotReady,
		Message: truncate("Error syncing load balancer: "+err.Error(), 4096)}
	return setConditions(cur, want)
}

// setConditions sets want on cur's conditions: ours not in want are
// removed, others' kept, a condition whose status did not change keeps its
// lastTransitionTime.
func setConditions(cur *corev1.Service, want map[string]metav1.Condition) ([]metav1.Condition, bool) {
	out := slices.DeleteFunc(slices.Clone(cur.Status.Conditions), func(c metav1.Condition) bool {
		_, keep := want[c.Type]
		return ours(c) && !keep
	})
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	for _, typ := range slices.Sorted(maps.Keys(want)) {
		c := want[typ]
		c.ObservedGeneration = cur.Generation
		c.LastTransitionTime = now
		meta.SetStatusCondition(&out, c)
	}
	return out, !conditionsEqual(cur.Status.Conditions, out)
}

// withoutOurs is cur's conditions without the controller's: the Service
// no longer has a load balancer from us.
func withoutOurs(cur *corev1.Service) ([]metav1.Condition, bool) {
	return setConditions(cur, nil)
}

func conditionsEqual(a, b []metav1.Condition) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.Type != y.Type || x.Status != y.Status || x.Reason != y.Reason || x.Message != y.Message ||
			x.ObservedGeneration != y.ObservedGeneration || !x.LastTransitionTime.Equal(&y.LastTransitionTime) {
			return false
		}
	}
	return true
}

// conditionsBody is conditions for a merge patch (the list replaces the
// Service's; the resourceVersion guard keeps another writer's conditions).
func conditionsBody(conditions []metav1.Condition) any {
	if len(conditions) == 0 {
		return nil
	}
	return conditions
}

// truncate cuts msg to at most n bytes (the API server takes 32768 in a
// condition's message; a cloud's error can be long), on a rune boundary.
func truncate(msg string, n int) string {
	if len(msg) <= n {
		return msg
	}
	cut := n - len("…")
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + "…"
}
