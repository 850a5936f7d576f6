package router

import (
	"context"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	cloudproviderapi "k8s.io/cloud-provider/api"
	upstreamfake "k8s.io/cloud-provider/fake"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends/openstack"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/providerid"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/dispatch"
)

// The providerIDs Cluster API's infrastructure providers write on the
// Nodes they make, as they write them.
const (
	// capaID is CAPA's: aws:///<availability zone>/<instance id>.
	capaID = "aws:///us-west-2a/i-0123456789abcdef0"
	// capvID is CAPV's: vsphere://<BIOS UUID>.
	capvID = "vsphere://42204d3b-8d9c-1d2e-3f4a-5b6c7d8e9f00"
	// capoID and capoRegionID are CAPO's: openstack:///<server uuid>, and
	// openstack://<region>/<server uuid> for a cloud of several regions.
	capoID       = "openstack:///9e5f1c2a-7b3d-4e8f-a1b2-c3d4e5f6a7b8"
	capoRegionID = "openstack://RegionOne/9e5f1c2a-7b3d-4e8f-a1b2-c3d4e5f6a7b8"
	// metal3ID and metal3LegacyID are CAPM3's: metal3://<namespace>/<BareMetalHost>/<Metal3Machine>,
	// and the older metal3://<BareMetalHost uid>.
	metal3ID       = "metal3://metal3/bmh-0/bm-1"
	metal3LegacyID = "metal3://1f2e3d4c-5b6a-4798-8a9b-0c1d2e3f4a5b"
)

// recorder is a backend with instances that remembers the providerID it
// was asked about, and answers metadata carrying it.
type recorder struct {
	*upstreamfake.Cloud
	mu    sync.Mutex
	asked []string
}

func newRecorder() *recorder {
	return &recorder{Cloud: &upstreamfake.Cloud{EnableInstancesV2: true, DisableLoadBalancers: true, DisableRoutes: true}}
}

func (c *recorder) InstancesV2() (cloudprovider.InstancesV2, bool) { return c, true }

func (c *recorder) record(n *corev1.Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.asked = append(c.asked, n.Spec.ProviderID)
}

func (c *recorder) InstanceExists(_ context.Context, n *corev1.Node) (bool, error) {
	c.record(n)
	return true, nil
}

func (c *recorder) InstanceShutdown(_ context.Context, n *corev1.Node) (bool, error) {
	c.record(n)
	return false, nil
}

func (c *recorder) InstanceMetadata(_ context.Context, n *corev1.Node) (*cloudprovider.InstanceMetadata, error) {
	c.record(n)
	return &cloudprovider.InstanceMetadata{ProviderID: n.Spec.ProviderID}, nil
}

func (c *recorder) askedAbout() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.asked...)
}

func withSchemes(r *Router, aliases ...config.SchemeAlias) { r.Cfg.Nodes.Schemes = aliases }

// TestClusterAPIProviderIDs routes the Nodes Cluster API's providers make,
// with their providerIDs as those providers write them, each to its
// backend, which is asked with the providerID unchanged; Metal3's go to
// the bare-metal backend named in nodes.schemes. The backends' own parsers
// take these forms (aws TestParseProviderID, vsphere TestUUIDFromProviderID,
// openstack TestParseProviderID, and ParseProviderID here).
func TestClusterAPIProviderIDs(t *testing.T) {
	aws, os, vs := newRecorder(), newRecorder(), newRecorder()
	r := metalRouter(t, "error",
		Backend{Name: "ec2", Type: "aws", Scheme: "aws", Cloud: aws},
		Backend{Name: "os", Type: "openstack", Scheme: "openstack", Cloud: os},
		Backend{Name: "vc", Type: "vsphere", Scheme: "vsphere", Cloud: vs})
	withSchemes(r, config.SchemeAlias{Scheme: "metal3", Backend: "metal"})
	ctx := context.Background()
	for _, tc := range []struct {
		node    *corev1.Node
		backend string
		asked   *recorder
	}{
		{newNode("capa-1", withProviderID(capaID)), "ec2", aws},
		{newNode("capv-1", withProviderID(capvID)), "vc", vs},
		{newNode("capo-1", withProviderID(capoID)), "os", os},
		{newNode("capo-2", withProviderID(capoRegionID)), "os", os},
		{newNode("bm-1", withProviderID(metal3ID)), "metal", nil},
		{newNode("rule-1", withProviderID(metal3LegacyID)), "metal", nil},
		{newNode("bm-1", withProviderID(metal3ID), withNodeBackend("metal")), "metal", nil}, // once initialised
	} {
		n := tc.node
		md, err := r.InstanceMetadata(ctx, n)
		if err != nil {
			t.Errorf("%s: InstanceMetadata: %v", n.Spec.ProviderID, err)
			continue
		}
		if got := md.AdditionalLabels[string(annotation.NodeBackend)]; got != tc.backend || md.ProviderID != n.Spec.ProviderID {
			t.Errorf("%s: routed to %q with providerID %q, want %s and the providerID unchanged", n.Spec.ProviderID, got, md.ProviderID, tc.backend)
		}
		if tc.asked != nil {
			if asked := tc.asked.askedAbout(); len(asked) == 0 || asked[len(asked)-1] != n.Spec.ProviderID {
				t.Errorf("%s: backend asked about %v", n.Spec.ProviderID, asked)
			}
		}
		if ok, err := r.InstanceExists(ctx, n); !ok || err != nil {
			t.Errorf("%s: InstanceExists = %v, %v", n.Spec.ProviderID, ok, err)
		}
	}
	for _, id := range []string{capoID, capoRegionID} {
		if uuid, _, err := openstack.ParseProviderID(id); err != nil || uuid != "9e5f1c2a-7b3d-4e8f-a1b2-c3d4e5f6a7b8" {
			t.Errorf("openstack.ParseProviderID(%q) = %q, %v", id, uuid, err)
		}
	}
	for _, id := range []string{metal3ID, metal3LegacyID} {
		if s, err := providerid.Scheme(id); err != nil || s != "metal3" {
			t.Errorf("Scheme(%q) = %q, %v", id, s, err)
		}
	}
}

// TestMetal3NodesThroughUpstreamControllers drives upstream's cloud-node
// and node-lifecycle controllers over Nodes Metal3 made, in both
// providerID forms: with nodes.schemes giving metal3 to the bare-metal
// backend, each is initialised from the inventory entry of its name, its
// providerID kept; one the inventory does not list is never deleted (a
// Warning NodeOwnerNotFound says why). Without the entry, metal3 nodes are
// no backend's: never initialised.
func TestMetal3NodesThroughUpstreamControllers(t *testing.T) {
	for _, served := range []bool{true, false} {
		t.Run(map[bool]string{true: "served", false: "not-served"}[served], func(t *testing.T) {
			r := metalRouter(t, "error")
			if served {
				withSchemes(r, config.SchemeAlias{Scheme: "metal3", Backend: "metal"})
			}
			c := startCluster(t, r,
				newNode("bm-1", withProviderID(metal3ID), uninitialized),
				newNode("rule-1", withProviderID(metal3LegacyID), uninitialized),
				newNode("m3-unknown", withProviderID("metal3://metal3/bmh-9/m3-unknown"), notReady))
			asked := newAsked(r)
			c.runNodeController(t, asked)
			c.runNodeLifecycle(t, asked)
			eventually(t, "every node asked 3 times", func() bool {
				return asked.allAsked([]*corev1.Node{newNode("bm-1"), newNode("rule-1"), newNode("m3-unknown")}, 3)
			})
			for name, zone := range map[string]string{"bm-1": "rack-a", "rule-1": "rack-b"} {
				if served {
					// The label may come a refresh after the taint goes: the
					// fake clientset keeps no resourceVersions, so it takes
					// upstream's initialising Update, made from its cache of
					// the node before the router's label patch, which drops
					// the label; a real API server refuses it as stale.
					eventually(t, name+" initialised with its platform label", func() bool {
						n, _ := c.node(t, name)
						return !hasTaint(n, cloudproviderapi.TaintExternalCloudProvider) && n.Labels[providerid.PlatformLabel] != ""
					})
				}
				n, _ := c.node(t, name)
				initialised := !hasTaint(n, cloudproviderapi.TaintExternalCloudProvider)
				if initialised != served {
					t.Errorf("%s initialised = %v", name, initialised)
				}
				if !served {
					continue
				}
				if !strings.HasPrefix(n.Spec.ProviderID, "metal3://") || n.Labels[corev1.LabelTopologyZone] != zone ||
					n.Labels[string(annotation.NodeBackend)] != "metal" || n.Labels[providerid.PlatformLabel] != "baremetal" {
					t.Errorf("%s: providerID %q, labels %v", name, n.Spec.ProviderID, n.Labels)
				}
			}
			if _, ok := c.node(t, "m3-unknown"); !ok {
				t.Fatal("m3-unknown, a Metal3 node the inventory does not list, was deleted")
			}
			if served {
				eventually(t, "m3-unknown's Warning", func() bool {
					return strings.Contains(strings.Join(c.events(t, "m3-unknown"), ","), "Warning/"+dispatch.ReasonNodeNotClaimed)
				})
			}
		})
	}
}
