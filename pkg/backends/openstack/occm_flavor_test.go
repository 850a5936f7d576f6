package openstack

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/flavorprofiles"
	"github.com/gophercloud/gophercloud/v2/openstack/loadbalancer/v2/flavors"
	corev1 "k8s.io/api/core/v1"
)

// makeFlavor creates an Octavia flavor (and its profile) for the amphora
// provider, removed when the test ends.
func makeFlavor(t *testing.T, c *gophercloud.ServiceClient) string {
	t.Helper()
	ctx := context.Background()
	fp, err := flavorprofiles.Create(ctx, c, flavorprofiles.CreateOpts{Name: "fp-" + randomID(t), ProviderName: "amphora", FlavorData: `{"loadbalancer_topology": "SINGLE"}`}).Extract()
	if err != nil {
		t.Fatalf("creating a flavor profile: %v", err)
	}
	f, err := flavors.Create(ctx, c, flavors.CreateOpts{Name: "f-" + randomID(t), FlavorProfileId: fp.ID, Enabled: true}).Extract()
	if err != nil {
		t.Fatalf("creating a flavor: %v", err)
	}
	t.Cleanup(func() {
		_ = flavors.Delete(ctx, c, f.ID).ExtractErr()
		_ = flavorprofiles.Delete(ctx, c, fp.ID).ExtractErr()
	})
	return f.ID
}

// makeZone creates an Octavia availability zone (and its profile) for the
// amphora provider, removed when the test ends. gophercloud has no client
// for them: the calls are Octavia's documented API.
func makeZone(t *testing.T, c *gophercloud.ServiceClient) string {
	t.Helper()
	ctx := context.Background()
	var prof struct {
		P struct {
			ID string `json:"id"`
		} `json:"availability_zone_profile"`
	}
	_, err := c.Post(ctx, c.ServiceURL("availabilityzoneprofiles"), map[string]any{"availability_zone_profile": map[string]any{
		"name": "azp-" + randomID(t), "provider_name": "amphora", "availability_zone_data": `{"compute_zone": "nova"}`,
	}}, &prof, &gophercloud.RequestOpts{OkCodes: []int{201}})
	if err != nil {
		t.Fatalf("creating an availability zone profile: %v", err)
	}
	name := "az-" + randomID(t)
	_, err = c.Post(ctx, c.ServiceURL("availabilityzones"), map[string]any{"availability_zone": map[string]any{
		"name": name, "availability_zone_profile_id": prof.P.ID, "enabled": true,
	}}, nil, &gophercloud.RequestOpts{OkCodes: []int{201}})
	if err != nil {
		t.Fatalf("creating an availability zone: %v", err)
	}
	t.Cleanup(func() {
		_, _ = c.Delete(ctx, c.ServiceURL("availabilityzones", name), nil)
		_, _ = c.Delete(ctx, c.ServiceURL("availabilityzoneprofiles", prof.P.ID), nil)
	})
	return name
}

// TestServiceControllerFlavorAndZone: flavor-id and availability-zone
// choose the load balancer's Octavia flavor and zone at creation (Octavia
// cannot change either later: a changed or removed annotation leaves the
// same load balancer); a flavor Octavia does not know is a Warning event
// naming the annotation, and no load balancer is made.
func TestServiceControllerFlavorAndZone(t *testing.T) {
	t.Parallel()
	e := newSvcEnv(t, nil, readyNode("n1", "10.23.0.1", nil))
	ctx := context.Background()
	sc, err := e.cloud.lb.clients(ctx)
	if err != nil {
		t.Fatal(err)
	}
	flavor, zone := makeFlavor(t, sc.loadBalancer), makeZone(t, sc.loadBalancer)
	want := "TCP/80 conn=-1 t=50000/5000/50000/0 xff= pool=TCP:ROUND_ROBIN monitor=TCP:5/3/1/3 members=n1"

	svc := newService("flavored", withAnnotation(AnnotationFlavorID, flavor), withAnnotation(AnnotationAvailabilityZone, zone))
	e.apply(t, svc)
	t.Cleanup(func() { deleteConverged(t, e.cloud.lb, svc) })
	lb := e.waitDetail(t, svc, want, statusIP(corev1.LoadBalancerIPModeVIP))
	if lb.FlavorID != flavor || lb.AvailabilityZone != zone {
		t.Errorf("load balancer flavor %q zone %q, want %q %q", lb.FlavorID, lb.AvailabilityZone, flavor, zone)
	}
	svc.Annotations = map[string]string{}
	e.apply(t, svc)
	time.Sleep(3 * time.Second) // Several syncs of the changed Service.
	if again := e.waitDetail(t, svc, want, statusIP(corev1.LoadBalancerIPModeVIP)); again.ID != lb.ID || again.FlavorID != flavor {
		t.Errorf("removing the annotations replaced or changed the load balancer: %s flavor %q, want %s %q", again.ID, again.FlavorID, lb.ID, flavor)
	}

	unknown := newService("unknown-flavor", withAnnotation(AnnotationFlavorID, "4ef2a1d3-8a4c-4a8b-9a0f-1b2c3d4e5f60"))
	e.apply(t, unknown)
	eventuallyOn(t, 30*time.Second, "a Warning event for the unknown flavor", func() error {
		for _, w := range e.warnings(t, unknown.Name) {
			if strings.HasPrefix(w, reasonOctaviaRefused+": ") && strings.Contains(w, string(AnnotationFlavorID)) {
				return nil
			}
		}
		return fmt.Errorf("warnings %q", e.warnings(t, unknown.Name))
	})
	if got, _, err := detail(e.cloud, unknown); err != nil || got != "0 load balancers" {
		t.Errorf("unknown flavor: Octavia holds %s", got)
	}
}
