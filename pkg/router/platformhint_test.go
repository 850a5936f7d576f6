package router

import (
	"context"
	"strings"
	"testing"

	cloudprovider "k8s.io/cloud-provider"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/providerid"
)

// TestPlatformAnnotationAndLabelDisagree: a node without providerID whose
// cloudprovider.kubernetes.io/platform annotation (KEP-5778) names one
// platform we serve and whose multicloud-ccm.io/backend label names a
// backend of another is a mistake to report, not a node to give the
// label's backend (which would initialise it as a machine of the platform
// its annotation says it is not): every call is an error naming both and
// the fix, the label's backend is never asked, and InstanceExists never
// answers false. When they agree, the label's backend serves it.
func TestPlatformAnnotationAndLabelDisagree(t *testing.T) {
	vs := newSpy(true, false, &cloudprovider.InstanceMetadata{ProviderID: "vsphere://4211-aa"})
	metal := newSpy(true, false, &cloudprovider.InstanceMetadata{ProviderID: "baremetal://x"})
	r := mustRouter(t, testConfig(),
		Backend{Name: "metal", Type: "baremetal", Scheme: "baremetal", Cloud: metal},
		Backend{Name: "vs", Type: "vsphere", Scheme: "vsphere", Cloud: vs})
	ctx := context.Background()
	n := newNode("x", withPlatformAnnotation("baremetal"), withNodeBackend("vs"), uninitialized)
	wants := []string{providerid.PlatformAnnotation, `"baremetal"`, string(annotation.NodeBackend), `"vs"`, "vsphere"}
	check := func(call string, err error) {
		t.Helper()
		for _, want := range wants {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: error %v does not say %s", call, err, want)
			}
		}
	}
	md, err := r.InstanceMetadata(ctx, n)
	check("InstanceMetadata", err)
	if md != nil {
		t.Errorf("InstanceMetadata = %+v", md)
	}
	if ok, err := r.InstanceExists(ctx, n); ok || err == nil {
		t.Errorf("InstanceExists = %v, %v; want an error", ok, err)
	} else {
		check("InstanceExists", err)
	}
	_, err = r.InstanceShutdown(ctx, n)
	check("InstanceShutdown", err)
	if c := vs.calls.Load(); c != 0 {
		t.Errorf("the vSphere backend was asked %d times about a node annotated baremetal", c)
	}

	agree := newNode("y", withPlatformAnnotation("vsphere"), withNodeBackend("vs"), uninitialized)
	if md, err := r.InstanceMetadata(ctx, agree); err != nil || md.ProviderID != "vsphere://4211-aa" {
		t.Errorf("annotation and label agreeing: InstanceMetadata = %+v, %v", md, err)
	}
}

// TestPlatformAnnotationPassesOverOtherPlatformsRules: a nodes.rules entry
// is a broad default (a name pattern); a node's KEP-5778 platform
// annotation names its platform exactly. A node annotated baremetal that a
// rule for the vSphere backend also matches is claimed by the bare-metal
// backend, and vSphere is never asked, as a node the annotation names
// vsphere is still given to vSphere by that rule.
func TestPlatformAnnotationPassesOverOtherPlatformsRules(t *testing.T) {
	vs := newSpy(true, false, &cloudprovider.InstanceMetadata{ProviderID: "vsphere://4211-aa"})
	metal := newSpy(true, false, &cloudprovider.InstanceMetadata{ProviderID: "baremetal://r-1"})
	r := mustRouter(t, testConfig(withRule("vs", "^r-")),
		Backend{Name: "metal", Type: "baremetal", Scheme: "baremetal", Cloud: metal},
		Backend{Name: "vs", Type: "vsphere", Scheme: "vsphere", Cloud: vs})
	ctx := context.Background()
	md, err := r.InstanceMetadata(ctx, newNode("r-1", withPlatformAnnotation("baremetal"), uninitialized))
	if err != nil || md.ProviderID != "baremetal://r-1" {
		t.Errorf("annotated baremetal, matched by vSphere's rule: InstanceMetadata = %+v, %v; want the bare-metal machine", md, err)
	}
	if c := vs.calls.Load(); c != 0 {
		t.Errorf("the vSphere backend was asked %d times about a node annotated baremetal", c)
	}
	md, err = r.InstanceMetadata(ctx, newNode("r-2", withPlatformAnnotation("vsphere"), uninitialized))
	if err != nil || md.ProviderID != "vsphere://4211-aa" {
		t.Errorf("annotated vsphere, matched by vSphere's rule: InstanceMetadata = %+v, %v", md, err)
	}
}
