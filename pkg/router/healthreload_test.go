package router

import (
	"context"
	"net/http"
	"testing"

	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/backend"
)

// backendUpSeries returns multicloud_ccm_backend_up by backend.
func backendUpSeries(t *testing.T) map[string]float64 {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "multicloud_ccm_backend_up" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "backend" {
					out[l.GetValue()] = m.GetGauge().GetValue()
				}
			}
		}
	}
	return out
}

func healthConfig(t *testing.T, pools string, withGone bool) *config.CloudConfig {
	t.Helper()
	registerHeldType()
	doc := "apiVersion: multicloud-ccm.io/v1alpha1\nkind: CloudConfig\nclusterID: test\nbackends:\n" +
		"- {name: up-metal, type: baremetal, baremetal: {inventory: [{name: bm-1}], addressPools: [" + pools + "]}}\n"
	if withGone {
		doc += "- {name: up-gone, type: " + heldType + ", " + heldType + ": {cloud: up-gone, ip: 198.51.100.9}}\n"
	}
	cfg, err := config.Parse([]byte(doc), "")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestBackendUpAfterReload (#24 defect 8): after a reload,
// multicloud_ccm_backend_up agrees with /healthz and the status: a backend
// reconfigured in place while down keeps reporting 0 until it is seen up,
// and a removed backend's series is deleted, so an alert on it clears.
func TestBackendUpAfterReload(t *testing.T) {
	ctx := context.Background()
	rl, err := NewReloadable(ctx, healthConfig(t, "{name: a, addresses: [192.0.2.0/30]}", true))
	if err != nil {
		t.Fatal(err)
	}
	metal := rl.Current().ByName["up-metal"]
	for range backend.UnreachableAfter {
		metal.Health.Observe(ctx, backend.OpGetLoadBalancer, errCloudDown)
	}
	if got := backendUpSeries(t); got["up-metal"] != 0 || got["up-gone"] != 1 {
		t.Fatalf("before the reload: backend_up = %v", got)
	}

	ch, err := rl.Apply(ctx, healthConfig(t, "{name: b, addresses: [198.51.100.0/30]}", false))
	if err != nil {
		t.Fatal(err)
	}
	if len(ch.Reconfigured) != 1 || len(ch.Removed) != 1 {
		t.Fatalf("changes %+v: want up-metal reconfigured and up-gone removed", ch)
	}
	got := backendUpSeries(t)
	if v, ok := got["up-metal"]; !ok || v != 0 {
		t.Errorf("reconfigured while down: backend_up = %v (exported %v), want 0", v, ok)
	}
	if _, ok := got["up-gone"]; ok {
		t.Error("the removed backend's backend_up series is still exported")
	}
	if rl.BackendHealthChecker().Check(&http.Request{}) == nil {
		t.Error("/healthz passes while the reconfigured backend is down")
	}
	if st := rl.BackendStatus(); len(st) != 1 || st[0].Up {
		t.Errorf("status %+v: want up-metal down", st)
	}

	rl.Current().ByName["up-metal"].Health.Observe(ctx, backend.OpGetLoadBalancer, nil)
	if got := backendUpSeries(t); got["up-metal"] != 1 {
		t.Errorf("seen up: backend_up = %v, want 1", got["up-metal"])
	}
}
