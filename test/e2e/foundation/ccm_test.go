package foundation

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/framework"
)

// TestRestartKeepsAddresses restarts the CCM: a Service keeps its address,
// the new process re-checks it (its load-balancer controller's start-up
// pass, which ends with one summary line) without an event, since nothing
// changed, and a Service created afterwards gets another address. It runs
// alone.
func TestRestartKeepsAddresses(t *testing.T) {
	exclusive.Lock()
	defer exclusive.Unlock()
	cp, ccm := env(t)
	ctx := ctxFor(t)
	createService(ctx, t, "keep")
	framework.Eventually(t, settle, "keep load balancer", framework.ServiceMatches(cp.Client, ns, "keep", oneIngressIn(metalPool)))
	framework.Eventually(t, settle, "keep's EnsuredLoadBalancer event", ensuredMoreThan(cp, "keep", 0))
	before := ingressOf(ctx, t, "keep")
	ensured := ensuredCount(ctx, t, cp, "keep")

	logStart := logSize(t, ccm)
	if err := ccm.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, settle, "the new process's start-up pass over the Services it served", func(context.Context) (bool, string, error) {
		return strings.Contains(logSince(t, ccm, logStart), `pass="start-up"`), "no start-up summary line yet", nil
	})
	createService(ctx, t, "after-restart")
	framework.Eventually(t, settle, "after-restart load balancer", framework.ServiceMatches(cp.Client, ns, "after-restart", oneIngressIn(metalPool)))
	if got := ensuredCount(ctx, t, cp, "keep"); got != ensured {
		t.Errorf("keep has %d EnsuredLoadBalancer events after the restart, had %d: an unchanged Service is re-checked without one", got, ensured)
	}
	if got := ingressOf(ctx, t, "keep"); got != before {
		t.Errorf("keep's address changed across the restart: %s, was %s", got, before)
	}
	if got := ingressOf(ctx, t, "after-restart"); got == before {
		t.Errorf("after-restart got %s, the address keep already holds", got)
	}
}

func logSize(t *testing.T, ccm *framework.CCM) int64 {
	t.Helper()
	fi, err := os.Stat(ccm.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// logSince returns the CCM's log from offset on.
func logSince(t *testing.T, ccm *framework.CCM, offset int64) string {
	t.Helper()
	b, err := os.ReadFile(ccm.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	return string(b[min(offset, int64(len(b))):])
}

// ensuredCount counts the EnsuredLoadBalancer events on Service name.
func ensuredCount(ctx context.Context, t *testing.T, cp *framework.ControlPlane, name string) int32 {
	t.Helper()
	evs, err := framework.Events(ctx, cp.Client, "Service", ns, name)
	if err != nil {
		t.Fatal(err)
	}
	return countEvents(evs, "EnsuredLoadBalancer")
}

func countEvents(evs []corev1.Event, reason string) int32 {
	var n int32
	for _, e := range evs {
		if e.Reason == reason {
			n += max(e.Count, 1)
		}
	}
	return n
}

// ensuredMoreThan holds once Service name has more than n
// EnsuredLoadBalancer events.
func ensuredMoreThan(cp *framework.ControlPlane, name string, n int32) framework.Condition {
	return func(ctx context.Context) (bool, string, error) {
		evs, err := framework.Events(ctx, cp.Client, "Service", ns, name)
		if err != nil {
			return false, err.Error(), nil
		}
		got := countEvents(evs, "EnsuredLoadBalancer")
		return got > n, fmt.Sprintf("%d EnsuredLoadBalancer events, want more than %d", got, n), nil
	}
}

func TestSecurePort(t *testing.T) {
	t.Parallel()
	_, ccm := shared(t)
	ctx := ctxFor(t)
	code, body, err := ccm.Get(ctx, "/healthz")
	if err != nil || code != http.StatusOK || string(body) != "ok" {
		t.Fatalf("/healthz = %d %q, %v; want 200 ok", code, body, err)
	}
	framework.Eventually(t, settle, "multicloud_ccm_backend_requests_total in /metrics", func(ctx context.Context) (bool, string, error) {
		code, body, err := ccm.Get(ctx, "/metrics")
		if err != nil {
			return false, err.Error(), nil
		}
		return code == http.StatusOK && strings.Contains(string(body), "multicloud_ccm_backend_requests_total{"), "status " + http.StatusText(code), nil
	})
	for token, want := range map[string]int{"": http.StatusForbidden, "not-a-token": http.StatusUnauthorized} {
		if code, _, err := ccm.GetWithToken(ctx, "/metrics", token); err != nil || code != want {
			t.Errorf("/metrics with token %q = %d, %v; want %d", token, code, err, want)
		}
	}
}
