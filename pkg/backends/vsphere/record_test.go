package vsphere

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

func TestRecordValues(t *testing.T) {
	long := strings.Repeat("vcenter-", 12) + "example.com"
	tests := []struct {
		name, got, want string
	}{
		{"plain host", serverRecord(mustURL(t, "https://vc1.example.com/sdk")), "vc1.example.com"},
		{"upper case, port 443", serverRecord(mustURL(t, "https://VC1.example.com:443/sdk")), "vc1.example.com"},
		{"datacenter name", datacenterRecord("dc-east"), "dc-east"},
		{"datacenter with slashes", datacenterRecord("/dc-east/"), "dc-east"},
		{"other port", serverRecord(mustURL(t, "https://10.0.0.5:8443/sdk")), "10.0.0.5_8443-"},
		{"inventory path", datacenterRecord("/emea/dc 1"), "emea_dc_1-"},
		{"long name", labelValue(long), strings.TrimRight(long[:46], "-_.") + "-"},
		{"nothing valid", labelValue("::"), ""},
	}
	for _, tt := range tests {
		if errs := validation.IsValidLabelValue(tt.got); len(errs) > 0 {
			t.Errorf("%s: %q is not a label value: %v", tt.name, tt.got, errs)
		}
		if !strings.HasPrefix(tt.got, tt.want) || (strings.HasSuffix(tt.want, "-") || tt.want == "") && len(tt.got) != len(tt.want)+16 {
			t.Errorf("%s: %q, want %q followed by 16 hex digits when it ends in -", tt.name, tt.got, tt.want)
		}
	}
	if labelValue("10.0.0.5:8443") == labelValue("10.0.0.5_8443") {
		t.Error("two names that differ only in an invalid character record the same value")
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func withDatacenters(n int) simOption { return func(s *simSetup) { s.model.Datacenter = n } }

// guestDC gives every VM of a datacenter a guest address 10.<net>.0.<i+1>
// and its name as DNS name.
func guestDC(t *testing.T, s *sim, dc string, netByte int) []vm {
	t.Helper()
	vms := s.vms(t, dc)
	for i, v := range vms {
		s.setGuest(t, v, fmt.Sprintf("10.%d.0.%d", netByte, i+1), strings.ToLower(v.name))
	}
	return vms
}

// TestControllersRemovedVCenterKeepsNodes drives the upstream controllers:
// nodes initialised by a backend with two vCenters (the first with two
// datacenters) record their vCenter and datacenter; after the second
// vCenter and the second datacenter are removed from the config, their
// nodes stay, while a destroyed VM of what is still configured is deleted.
func TestControllersRemovedVCenterKeepsNodes(t *testing.T) {
	a, b := startSim(t, withDatacenters(2)), startSim(t)
	randomizeUUIDs(t, b)
	a0, a1, b0 := guestDC(t, a, "DC0", 1), guestDC(t, a, "DC1", 2), guestDC(t, b, "DC0", 3)
	dir := credentialFiles(t, simUser, simPassword)
	both := newCloudFrom(t, parseSettings(t, dir, settingsJSON{RefreshInterval: "1s", VCenters: []map[string]any{vcenterEntry(a, "DC0", "DC1"), vcenterEntry(b)}}))
	want := map[string][2]string{ // node: vCenter, datacenter
		"a0": {a.host(), "DC0"}, "a0-gone": {a.host(), "DC0"}, "a1": {a.host(), "DC1"}, "b0": {b.host(), "DC0"},
	}
	var nodes []*corev1.Node
	t.Run("initialise", func(t *testing.T) {
		k := runControllers(t, both,
			kubeletNode("a0", withVM(a0[0])), kubeletNode("a0-gone", withVM(a0[1])),
			kubeletNode("a1", withVM(a1[0])), kubeletNode("b0", withVM(b0[0])))
		for name, loc := range want {
			eventually(t, "node "+name+" initialised with its vCenter and datacenter", func() error {
				n, _ := k.node(t, name)
				if err := initialised(n); err != nil {
					return err
				}
				server, dc := n.Labels[LabelServer], n.Labels[LabelDatacenter]
				if server != serverRecord(mustURL(t, "https://"+loc[0])) || dc != loc[1] {
					return fmt.Errorf("labels %v, want %s=%s (of %s), %s=%s", n.Labels, LabelServer, serverRecord(mustURL(t, "https://"+loc[0])), loc[0], LabelDatacenter, loc[1])
				}
				nodes = append(nodes, n)
				return nil
			})
		}
	})
	if t.Failed() {
		t.FailNow()
	}
	for _, n := range nodes {
		n.ResourceVersion = ""
	}

	onlyA := newCloudFrom(t, parseSettings(t, dir, settingsJSON{RefreshInterval: "1s", VCenters: []map[string]any{vcenterEntry(a, "DC0")}}))
	ctx := context.Background()
	for name, reason := range map[string]string{"b0": ReasonVCenterNotConfigured, "a1": ReasonDatacenterNotConfigured} {
		n := nodeNamed(nodes, name)
		ok, err := onlyA.InstanceExists(ctx, n)
		if ue, isUser := backends.AsUserError(err); !isUser || ue.Reason != reason || !strings.Contains(err.Error(), n.Labels[LabelServer]) {
			t.Errorf("InstanceExists(%s) with its vCenter or datacenter removed = %v, %v; want a %s error naming the recorded vCenter", name, ok, err, reason)
		}
	}
	a.destroy(t, a0[1])
	k := runControllers(t, onlyA, nodes...)
	eventually(t, "node of the destroyed VM in a configured datacenter deleted", func() error {
		if _, ok := k.node(t, "a0-gone"); ok {
			return fmt.Errorf("node a0-gone still exists")
		}
		return nil
	})
	time.Sleep(3 * time.Second) // many lifecycle rounds
	for _, name := range []string{"a0", "a1", "b0"} {
		if _, ok := k.node(t, name); !ok {
			t.Errorf("node %s deleted after its vCenter or datacenter was removed from the config", name)
		}
	}
}

func nodeNamed(nodes []*corev1.Node, name string) *corev1.Node {
	for _, n := range nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}
