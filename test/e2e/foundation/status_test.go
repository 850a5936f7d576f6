package foundation

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/framework"
)

// TestStatus runs "multicloud-ccm status" from the built binary against the
// real API server: a Service annotated for metal2 shows up under metal2,
// chosen by annotation, with its address; the CCM wrote the served-by
// annotation status reads; the table has its four sections (the backends'
// health and the pools from the ConfigMap the CCM publishes).
func TestStatus(t *testing.T) {
	t.Parallel()
	cp, ccm := shared(t)
	ctx := ctxFor(t)
	createService(ctx, t, "status-lb", framework.WithAnnotation(string(annotation.LoadBalancerBackend), "metal2"))
	framework.Eventually(t, settle, "status-lb served by metal2", framework.ServiceMatches(cp.Client, ns, "status-lb", oneIngressIn(metal2Pool)))
	framework.Eventually(t, settle, "status-lb annotated", framework.ServiceMatches(cp.Client, ns, "status-lb", framework.ServiceCondition(
		func(s *corev1.Service) (bool, string) {
			return s.Annotations[string(annotation.LoadBalancerServedBy)] == "metal2", fmt.Sprintf("annotations %v", s.Annotations)
		})))

	out, errOut, code := runCCM(t, "status", "--kubeconfig", cp.AdminKubeconfig, "-o", "json")
	if code != 0 || errOut != "" {
		t.Fatalf("status: exit %d, stderr %q", code, errOut)
	}
	var st struct {
		Backends []struct {
			Name          string
			LoadBalancers int
		}
		LoadBalancers []struct{ Backend, Namespace, Name, ChosenBy, Address string }
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	found := false
	for _, s := range st.LoadBalancers {
		if s.Namespace == ns && s.Name == "status-lb" {
			found = true
			addr, err := netip.ParseAddr(s.Address)
			if s.Backend != "metal2" || s.ChosenBy != "annotation" || err != nil || !metal2Pool.Contains(addr) {
				t.Errorf("status-lb: %+v", s)
			}
		}
	}
	counted := false
	for _, b := range st.Backends {
		counted = counted || (b.Name == "metal2" && b.LoadBalancers >= 1)
	}
	if !found || !counted {
		t.Errorf("status-lb listed %v, metal2 counted %v:\n%s", found, counted, out)
	}

	out, _, code = runCCM(t, "status", "--kubeconfig", cp.AdminKubeconfig)
	for _, h := range []string{"HEALTH", "LAST SUCCESS", "PROVIDER ID", "CHOSEN BY", "status-lb", "USED/SIZE"} {
		if code != 0 || !strings.Contains(out, h) {
			t.Errorf("status table: exit %d, no %q:\n%s", code, h, out)
		}
	}

	// The same counts on /metrics, from the CCM's informers.
	framework.Eventually(t, settle, "served gauges in /metrics", func(ctx context.Context) (bool, string, error) {
		code, body, err := ccm.Get(ctx, "/metrics")
		if err != nil || code != http.StatusOK {
			return false, fmt.Sprintf("%d %v", code, err), nil
		}
		var lines []string
		for _, l := range strings.Split(string(body), "\n") {
			if strings.HasPrefix(l, "multicloud_ccm_backend_load_balancers{") || strings.HasPrefix(l, "multicloud_ccm_backend_nodes{") {
				lines = append(lines, l)
			}
		}
		joined := strings.Join(lines, "\n")
		ok := strings.Contains(joined, `multicloud_ccm_backend_nodes{backend="metal"}`) &&
			strings.Contains(joined, `multicloud_ccm_backend_load_balancers{backend="metal2"}`) &&
			!strings.Contains(joined, `multicloud_ccm_backend_load_balancers{backend="metal2"} 0`)
		if ok {
			t.Logf("served gauges:\n%s", joined)
		}
		return ok, joined, nil
	})
}
