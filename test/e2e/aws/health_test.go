package aws

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/framework"
)

// TestReadinessFollowsTheCloud takes the simulated AWS down while a Service
// and a node ask for it: the built binary's /healthz (the chart's readiness
// probe) fails naming backend-health, /healthz?exclude=backend-health (its
// liveness probe) still passes, so an outage never restarts the pod; with
// AWS back, /healthz passes again.
func TestReadinessFollowsTheCloud(t *testing.T) {
	cp := env(t)
	ctx := ctxFor(t)
	fake.SetOutage(true)
	t.Cleanup(func() { fake.SetOutage(false) })

	createNode(ctx, t, "outage-node", fmt.Sprintf("aws:///%sa/i-0fedcba9876543210", region), "192.168.10.99")
	svc := framework.NewLoadBalancerService(ns, "outage", framework.WithAnnotation(string(annotation.LoadBalancerBackend), awsBackend))
	if _, err := framework.CreateService(ctx, cp.Client, svc); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, settle, "/healthz fails on backend-health", healthz("/healthz", http.StatusInternalServerError, "[-]backend-health failed"))
	framework.Eventually(t, settle, "/healthz?exclude=backend-health passes", healthz("/healthz?exclude=backend-health", http.StatusOK, "ok"))

	fake.SetOutage(false)
	framework.Eventually(t, settle, "/healthz passes with AWS back", healthz("/healthz", http.StatusOK, "ok"))
	if err := cp.Client.CoreV1().Services(ns).Delete(ctx, "outage", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cp.Client.CoreV1().Nodes().Delete(ctx, "outage-node", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, settle, "Service gone", framework.ServiceGone(cp.Client, ns, "outage"))
	framework.Eventually(t, settle, "nothing left in AWS", nothingInAWS)
}

// healthz holds once the CCM answers path with code and a body containing
// want.
func healthz(path string, code int, want string) framework.Condition {
	return func(ctx context.Context) (bool, string, error) {
		got, body, err := ccm.Get(ctx, path)
		if err != nil {
			return false, err.Error(), nil
		}
		return got == code && strings.Contains(string(body), want), fmt.Sprintf("%d %q", got, body), nil
	}
}
