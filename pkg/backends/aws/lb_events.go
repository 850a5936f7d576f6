package aws

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// Reasons of the events the backend records itself, before a change the
// Service's owner should know about while it happens (user errors are
// recorded by the service controller from the returned error instead).
const (
	// reasonReplacing: the NLB is about to be deleted and created again
	// (a new DNS name), because the Service asks for something AWS cannot
	// change on a running NLB.
	reasonReplacing = "LoadBalancerReplacing"
	// reasonTargetGroupsReplacing: listeners are about to move to new
	// target groups, because AWS cannot change a target group's protocol
	// or target type (also an adopted NLB's upstream group that does not
	// fit the port).
	reasonTargetGroupsReplacing = "LoadBalancerTargetGroupsReplacing"
	// reasonNoTargets: none of the Service's nodes has an address of its
	// target groups' IP family (a Warning; the load balancer is made).
	reasonNoTargets = "LoadBalancerNoTargets"
)

// events records the backend's own events on Services. The zero value
// records nothing (only logs) until setRecorder.
type events struct {
	mu       sync.Mutex
	recorder record.EventRecorder
}

func (e *events) setRecorder(r record.EventRecorder) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.recorder = r
}

// serviceKey carries the Service a call is about, for its events.
type serviceKey struct{}

// announce logs the message and records it as an event on the ctx's
// Service (see withService), before the change it announces is made.
func (e *events) announce(ctx context.Context, eventType, reason, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	klog.FromContext(ctx).Info(msg, "reason", reason)
	svc, _ := ctx.Value(serviceKey{}).(*corev1.Service)
	e.mu.Lock()
	r := e.recorder
	e.mu.Unlock()
	if r != nil && svc != nil && !backends.DryRun(ctx) {
		r.Event(svc, eventType, reason, msg)
	}
}
