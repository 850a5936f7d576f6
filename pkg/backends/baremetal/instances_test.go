package baremetal

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

func newTestCloud(t testing.TB, section string) *Cloud {
	t.Helper()
	s, errs := parseYAML(t, section)
	if len(errs) > 0 {
		t.Fatalf("settings: %v", errs.ToAggregate())
	}
	c, err := New(context.Background(), backends.Options{Name: "metal", ClusterID: "c1", Settings: s})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c.(*Cloud)
}

// newNode is a Node with the given providerID ("" for none).
func newNode(name, providerID string) *corev1.Node {
	return testutil.NewNode(name, testutil.WithProviderID(providerID))
}

func TestInstances(t *testing.T) {
	inst, ok := newTestCloud(t, validSection).InstancesV2()
	if !ok {
		t.Fatal("InstancesV2 not offered with an inventory")
	}
	ctx := context.Background()
	tests := []struct {
		name       string
		node       *corev1.Node
		wantExists bool
		wantErr    string
		// wantReason is the UserError reason of every error, if any.
		wantReason string
		// wantMetaErr is set when metadata fails though InstanceExists did not.
		wantMetaErr string
	}{
		{name: "by providerID", node: newNode("whatever", "baremetal://bm-1"), wantExists: true},
		{name: "by node name", node: newNode("bm-2", ""), wantExists: true},
		{name: "name not in inventory", node: newNode("bm-9", ""), wantMetaErr: "not in the inventory"},
		{name: "providerID not in inventory", node: newNode("bm-1", "baremetal://bm-9"), wantMetaErr: "not in the inventory"},
		{name: "other scheme", node: newNode("bm-1", "aws:///us-east-1a/i-1"), wantErr: "not a baremetal providerID"},
		{name: "extra slash", node: newNode("bm-1", "baremetal:///bm-1"), wantErr: "malformed", wantReason: ReasonInvalidProviderID},
		{name: "empty name", node: newNode("bm-1", "baremetal://"), wantErr: "malformed", wantReason: ReasonInvalidProviderID},
		{name: "upper case", node: newNode("bm-1", "baremetal://BM-1"), wantErr: "malformed", wantReason: ReasonInvalidProviderID},
		{name: "path", node: newNode("bm-1", "baremetal://bm-1/x"), wantErr: "malformed", wantReason: ReasonInvalidProviderID},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			exists, err := inst.InstanceExists(ctx, tt.node)
			shutdown, serr := inst.InstanceShutdown(ctx, tt.node)
			meta, merr := inst.InstanceMetadata(ctx, tt.node)
			if tt.wantErr != "" {
				for _, e := range []error{err, serr, merr} {
					if e == nil || !strings.Contains(e.Error(), tt.wantErr) {
						t.Errorf("error = %v, want %q", e, tt.wantErr)
					}
					if ue, ok := backends.AsUserError(e); tt.wantReason != "" && (!ok || ue.Reason != tt.wantReason) {
						t.Errorf("error %v is not a UserError with reason %s", e, tt.wantReason)
					}
				}
				if exists || shutdown || meta != nil {
					t.Errorf("answers with an error: exists=%v shutdown=%v meta=%v", exists, shutdown, meta)
				}
				if strings.Contains(err.Error(), `"metal"`) {
					t.Errorf("error %q names the backend: the router does", err)
				}
				return
			}
			if err != nil || serr != nil || exists != tt.wantExists || shutdown {
				t.Fatalf("InstanceExists = %v, %v; InstanceShutdown = %v, %v; want %v, false", exists, err, shutdown, serr, tt.wantExists)
			}
			if tt.wantMetaErr != "" {
				if meta != nil || merr == nil || !strings.Contains(merr.Error(), tt.wantMetaErr) || !errors.Is(merr, cloudprovider.InstanceNotFound) {
					t.Fatalf("InstanceMetadata = %v, %v; want InstanceNotFound containing %q", meta, merr, tt.wantMetaErr)
				}
				if strings.Contains(merr.Error(), `"metal"`) {
					t.Errorf("error %q names the backend: the router does", merr)
				}
				return
			}
			if merr != nil || meta == nil {
				t.Fatalf("InstanceMetadata = %v, %v", meta, merr)
			}
		})
	}
}

func TestInstanceMetadataContent(t *testing.T) {
	c := newTestCloud(t, validSection)
	inst, _ := c.InstancesV2()
	meta, err := inst.InstanceMetadata(context.Background(), newNode("bm-1", ""))
	if err != nil {
		t.Fatal(err)
	}
	want := cloudprovider.InstanceMetadata{ProviderID: "baremetal://bm-1", InstanceType: "r650", Zone: "rack-a", Region: "dc-1"}
	if meta.ProviderID != want.ProviderID || meta.InstanceType != want.InstanceType || meta.Zone != want.Zone || meta.Region != want.Region {
		t.Errorf("metadata = %+v, want %+v", meta, want)
	}
	if len(meta.NodeAddresses) != 2 || meta.NodeAddresses[0] != (corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.0.11"}) {
		t.Errorf("addresses = %v", meta.NodeAddresses)
	}
	if meta.AdditionalLabels["example.com/tier"] != "gold" || len(meta.AdditionalLabels) != 1 {
		t.Errorf("labels = %v", meta.AdditionalLabels)
	}
	meta.AdditionalLabels["example.com/tier"] = "changed"
	meta.NodeAddresses[0].Address = "changed"
	again, _ := inst.InstanceMetadata(context.Background(), newNode("bm-1", ""))
	if again.AdditionalLabels["example.com/tier"] != "gold" || again.NodeAddresses[0].Address != "10.0.0.11" {
		t.Error("metadata shares maps or slices with the inventory")
	}
}

func TestCapabilities(t *testing.T) {
	tests := []struct {
		name              string
		section           string
		wantInst, wantLBs bool
	}{
		{name: "both", section: validSection, wantInst: true, wantLBs: true},
		{name: "inventory only", section: "inventory: [{name: a}]", wantInst: true},
		{name: "pools only", section: "addressPools: [{name: p, addresses: [192.0.2.0/24]}]", wantLBs: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newTestCloud(t, tt.section)
			_, inst := c.InstancesV2()
			_, lbs := c.LoadBalancer()
			if inst != tt.wantInst || lbs != tt.wantLBs {
				t.Errorf("InstancesV2 %v, LoadBalancer %v; want %v, %v", inst, lbs, tt.wantInst, tt.wantLBs)
			}
			for name, ok := range map[string]bool{"Instances": second(c.Instances()), "Zones": second(c.Zones()), "Clusters": second(c.Clusters()), "Routes": second(c.Routes())} {
				if ok {
					t.Errorf("%s offered", name)
				}
			}
		})
	}
}

func second[T any](_ T, ok bool) bool { return ok }

func TestNewRejectsBadSettings(t *testing.T) {
	if _, err := New(context.Background(), backends.Options{Name: "metal", Settings: "nope"}); err == nil || !strings.Contains(err.Error(), "settings are string") {
		t.Errorf("New with wrong settings type: %v", err)
	}
	bad := &Settings{AddressPools: []AddressPool{{Name: "p", Addresses: []string{"192.0.2.0/24", "192.0.2.128/25"}}}}
	if _, err := New(context.Background(), backends.Options{Name: "metal", Settings: bad}); err == nil || !strings.Contains(err.Error(), "overlaps") {
		t.Errorf("New with overlapping pools: %v", err)
	}
}

func TestRegistered(t *testing.T) {
	r, ok := backends.Lookup(Type)
	if !ok || r.Scheme != Scheme || r.New == nil {
		t.Fatalf("registration = %+v, %v", r, ok)
	}
}
