package foundation

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/framework"
)

// TestUserErrorReasonIsAnEvent: a backend's user error on a Service
// reaches the user as a Warning event with the backend's own reason, not
// only upstream's generic SyncLoadBalancerFailed. Here the bare-metal
// backend refuses a requested address outside every pool.
func TestUserErrorReasonIsAnEvent(t *testing.T) {
	t.Parallel()
	cp, _ := shared(t)
	ctx := ctxFor(t)
	createService(ctx, t, "not-in-pool", framework.WithAnnotation(string(annotation.LoadBalancerIPs), "203.0.113.9"))
	framework.Eventually(t, settle, "a Warning event LoadBalancerIPNotInPool on not-in-pool",
		framework.EventSeen(cp.Client, "Service", ns, "not-in-pool", corev1.EventTypeWarning, "LoadBalancerIPNotInPool"))
}
