package router

import (
	"context"
	"strings"
	"testing"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
)

// TestSchemesEntryRemovedByReload: a Metal3 node served through a
// nodes.schemes entry carries the bare-metal backend's label; after a
// reload drops the entry, the node is an error, never "gone" (not
// deleted), and the error names what was removed and how to bring it
// back (the nodes.schemes entry), not the backend, which is still there.
func TestSchemesEntryRemovedByReload(t *testing.T) {
	ctx := context.Background()
	rl, err := NewReloadable(ctx, parseConfig(t, schemesConfig(true)))
	if err != nil {
		t.Fatal(err)
	}
	n := newNode("bm-1", withProviderID("metal3://metal3/bmh-0/bm-1"), withNodeBackend("metal"))
	if ok, err := rl.InstanceExists(ctx, n); !ok || err != nil {
		t.Fatalf("with nodes.schemes: InstanceExists = %v, %v", ok, err)
	}
	if _, err := rl.Apply(ctx, parseConfig(t, schemesConfig(false))); err != nil {
		t.Fatal(err)
	}
	ok, err := rl.InstanceExists(ctx, n)
	if ok || err == nil {
		t.Fatalf("after the entry went: InstanceExists = %v, %v; want an error", ok, err)
	}
	for _, want := range []string{"nodes.schemes", "metal3", "metal"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "if the backend was removed from the config") {
		t.Errorf("error %q blames a removed backend; backend metal is configured", err)
	}
}

func schemesConfig(withEntry bool) string {
	s := `apiVersion: multicloud-ccm.io/v1alpha1
kind: CloudConfig
clusterID: test
`
	if withEntry {
		s += "nodes:\n  schemes: [{scheme: metal3, backend: metal}]\n"
	}
	return s + `backends:
- name: metal
  type: baremetal
  baremetal:
    inventory: [{name: bm-1, addresses: [{type: InternalIP, address: 10.0.0.11}]}]
`
}

func parseConfig(t *testing.T, s string) *config.CloudConfig {
	t.Helper()
	cfg, err := config.Parse([]byte(s), "")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
