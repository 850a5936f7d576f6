package router

import (
	"context"
	"strings"
	"testing"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
)

// Backends of the real types that offer no load balancers, and one that
// does, as config sections.
var lbCapabilityBackends = map[string]struct {
	section string
	has     bool
	fix     string
}{
	"metal-nopools": {"{name: metal-nopools, type: baremetal, baremetal: {inventory: [{name: bm-1}]}}", false,
		"add an address pool under backends[0].baremetal.addressPools"},
	"vs": {"{name: vs, type: vsphere, vsphere: {vcenters: [{server: vc1.example.com, datacenters: [dc1], username: {env: VSU}, password: {env: VSP}}]}}", false,
		"vSphere backends offer no load balancers"},
	"os-off": {"{name: os-off, type: openstack, openstack: {auth: {authURL: 'https://keystone.example.com/v3', username: ccm, password: {env: P}, projectName: k8s}, region: RegionOne, loadBalancer: {enabled: false}}}", false,
		"set backends[0].openstack.loadBalancer.enabled to true"},
	"metal": {"{name: metal, type: baremetal, baremetal: {addressPools: [{name: a, addresses: [192.0.2.0/30]}]}}", true, ""},
}

func lbCapabilityConfig(name, routing string) string {
	return "apiVersion: multicloud-ccm.io/v1alpha1\nkind: CloudConfig\nclusterID: test\n" + routing +
		"backends:\n- " + lbCapabilityBackends[name].section + "\n"
}

// TestDefaultOrClassWithoutLoadBalancersRefusedByConfig (#24 defect 9):
// the config's validation, which `config validate`, the CCM's start and
// every reload run (config.Load, config.Parse), refuses a defaultBackend or
// class naming a backend that offers no load balancers, naming the field
// and the fix; and what a backend's settings say agrees with the backend
// built from them, so the router's own check (the same function, asked
// about the built backends) never disagrees.
func TestDefaultOrClassWithoutLoadBalancersRefusedByConfig(t *testing.T) {
	t.Setenv("VSU", "u")
	t.Setenv("VSP", "p")
	t.Setenv("P", "p")
	for name, tc := range lbCapabilityBackends {
		t.Run(name, func(t *testing.T) {
			plain, err := config.Parse([]byte(lbCapabilityConfig(name, "")), t.TempDir())
			if err != nil {
				t.Fatalf("without routing: %v", err)
			}
			reg, _ := backends.Lookup(plain.Backends[0].Type)
			cloud, err := reg.New(context.Background(), backends.Options{Name: name, ClusterID: "test", Settings: plain.Backends[0].Settings})
			if err != nil {
				t.Fatal(err)
			}
			if _, built := cloud.LoadBalancer(); built != tc.has {
				t.Errorf("built backend offers load balancers = %v, its settings say %v", built, tc.has)
			}
			for field, routing := range map[string]string{
				"loadBalancer.defaultBackend":     "loadBalancer: {defaultBackend: " + name + "}\n",
				"loadBalancer.classes[0].backend": "loadBalancer: {classes: [{name: example.com/x, backend: " + name + "}]}\n",
			} {
				_, err := config.Parse([]byte(lbCapabilityConfig(name, routing)), t.TempDir())
				if tc.has {
					if err != nil {
						t.Errorf("%s: %v", field, err)
					}
					continue
				}
				want := field + `: Invalid value: "` + name + `": backend "` + name + `" has no load balancers: ` + tc.fix
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("%s: Parse = %v, want %q", field, err, want)
				}
			}
		})
	}
}
