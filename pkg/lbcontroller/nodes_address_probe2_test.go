package lbcontroller

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	utilt "github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
)

// holdingEnsure is the router with its Targeter whose next
// EnsureLoadBalancer, once armed, is held until release.
type holdingEnsure struct {
	routerTargets
	*gate
}

func (h *holdingEnsure) EnsureLoadBalancer(ctx context.Context, clusterName string, svc *corev1.Service, nodes []*corev1.Node) (*corev1.LoadBalancerStatus, error) {
	h.pass()
	return h.routerTargets.EnsureLoadBalancer(ctx, clusterName, svc, nodes)
}

// TestProbeAddressChangeDuringFirstEnsure (review of 165ada6): a node's
// address changes while the controller's first EnsureLoadBalancer of an
// IP-target NLB is in flight (status not published yet). The controller
// does not count address changes (nodeChangeMatters); the router's
// address re-sync queues only Services it has ensured with a published
// status (EnqueueFor: EnsuredIn needs an ingress), and the stale-list
// check that caught this after the call (requeueIfStale, then
// errNotPublished retries until the status lands) is now skipped for the
// controller's calls (RequeuesOnNodeChange). The classless case is the
// regression of 165ada6; the classed one was skipped before it already
// (loadBalancerClass != nil).
func TestProbeAddressChangeDuringFirstEnsure(t *testing.T) {
	t.Run("classless", func(t *testing.T) {
		doc := strings.Replace(awsConfig, "loadBalancer:\n", "loadBalancer:\n  defaultBackend: aws\n", 1)
		addressChangeDuringFirstEnsure(t, doc, true, utilt.NewService("web",
			utilt.WithAnnotation("service.beta.kubernetes.io/aws-load-balancer-nlb-target-type", "ip")))
	})
	t.Run("classed", func(t *testing.T) {
		addressChangeDuringFirstEnsure(t, awsConfig, false, utilt.NewService("web", utilt.WithClass(awsIPClass)))
	})
}

func addressChangeDuringFirstEnsure(t *testing.T, doc string, classless bool, svc *corev1.Service) {
	h := &holdingEnsure{gate: newGate(true)}
	addressChangeWhileHeld(t, heldCall{doc: doc, classless: classless, svc: svc, what: "the first EnsureLoadBalancer", gate: h.gate,
		// Let the router's address batch flush while the call is held.
		settle: 1500 * time.Millisecond,
		wrap:   func(rt routerTargets) Cloud { h.routerTargets = rt; return h }})
}
