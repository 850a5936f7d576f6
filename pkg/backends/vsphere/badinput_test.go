package vsphere

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/vmware/govmomi/vim25/soap"
	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// checkNothingChanges asserts every InstancesV2 call on node fails with
// an error mentioning want (and, when reason is set, a user error with that
// reason): no false from InstanceExists, no metadata.
func checkNothingChanges(t *testing.T, c *Cloud, node *corev1.Node, reason string, want ...string) {
	t.Helper()
	ctx := context.Background()
	exists, eerr := c.InstanceExists(ctx, node)
	if eerr == nil {
		t.Errorf("InstanceExists = %v, nil; want an error", exists)
	}
	md, merr := c.InstanceMetadata(ctx, node)
	if merr == nil {
		t.Errorf("InstanceMetadata = %+v, nil; want an error", md)
	}
	for _, err := range []error{eerr, merr} {
		if err == nil {
			continue
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error %q does not mention %q", err, w)
			}
		}
		if ue, ok := backends.AsUserError(err); reason != "" && (!ok || ue.Reason != reason) {
			t.Errorf("error %v is not a %s user error", err, reason)
		}
	}
}

func TestBadInput(t *testing.T) {
	s := startSim(t)
	vms := guestAll(t, s, 1)
	node := newNode("n", withVM(vms[0]))
	t.Run("malformed providerID", func(t *testing.T) {
		c := newCloud(t, []*sim{s})
		for _, id := range []string{"vsphere://vm-17", "vsphere:///" + vms[0].uuid, ProviderIDPrefix + vms[0].uuid + "/", "vsphere://"} {
			// The reason every backend gives (the router's, the suite's).
			checkNothingChanges(t, c, newNode("n", withProviderID(id)), "InvalidProviderID", strconv.Quote(id), "spec.providerID", "vsphere://<bios-uuid>")
		}
	})
	t.Run("unknown datacenter", func(t *testing.T) {
		c := newCloud(t, []*sim{s}, func(sj *settingsJSON) { sj.VCenters[0]["datacenters"] = []string{"DC0", "DC9"} })
		checkNothingChanges(t, c, node, ReasonDatacenterNotFound, "vsphere.vcenters[0].datacenters[1]", `"DC9"`, "it has: DC0")
	})
	t.Run("wrong password", func(t *testing.T) {
		dir := credentialFiles(t, simUser, "wrong")
		sj := settingsJSON{VCenters: []map[string]any{vcenterEntry(s)}}
		c := newCloudFrom(t, parseSettings(t, dir, sj))
		checkNothingChanges(t, c, node, ReasonLoginFailed, "vsphere.vcenters[0]", simUser, "check the username and password")
		if strings.Contains(strings.Join(errStrings(c, node), " "), "wrong") {
			t.Errorf("an error shows the password")
		}
	})
	t.Run("missing tag category", func(t *testing.T) {
		c := newCloud(t, []*sim{s}, func(sj *settingsJSON) { sj.ZoneCategory = "no-such-category" })
		ctx := context.Background()
		md, err := c.InstanceMetadata(ctx, node)
		ue, ok := backends.AsUserError(err)
		if md != nil || !ok || ue.Reason != ReasonTagCategoryNotFound || !strings.Contains(err.Error(), "vsphere.zoneCategory") || !strings.Contains(err.Error(), `"no-such-category"`) {
			t.Errorf("InstanceMetadata = %v, %v; want a %s error naming zoneCategory", md, err, ReasonTagCategoryNotFound)
		}
		// The VM is still known to exist: a tagging problem deletes nothing.
		if ok, err := c.InstanceExists(ctx, node); err != nil || !ok {
			t.Errorf("InstanceExists = %v, %v; want true", ok, err)
		}
	})
	t.Run("unreadable credentials file", func(t *testing.T) {
		dir := credentialFiles(t, simUser, simPassword)
		if err := os.Remove(filepath.Join(dir, "password")); err != nil {
			t.Fatal(err)
		}
		settings := parseSettings(t, dir, settingsJSON{VCenters: []map[string]any{vcenterEntry(s)}})
		c, err := New(context.Background(), newOptions(settings))
		if err == nil || !strings.Contains(err.Error(), "vsphere.vcenters[0].password") || !strings.Contains(err.Error(), "reading secret file") || strings.Contains(err.Error(), "onprem") {
			t.Errorf("New = %v, %v; want an error naming the password field, not the backend (the router does)", c, err)
		}
	})
	t.Run("credentials from the environment", func(t *testing.T) {
		t.Setenv("TEST_VSPHERE_USER", simUser)
		t.Setenv("TEST_VSPHERE_PASSWORD", simPassword)
		e := vcenterEntry(s)
		e["username"] = map[string]string{"env": "TEST_VSPHERE_USER"}
		e["password"] = map[string]string{"env": "TEST_VSPHERE_PASSWORD"}
		c := newCloudFrom(t, parseSettings(t, t.TempDir(), settingsJSON{VCenters: []map[string]any{e}}))
		if ok, err := c.InstanceExists(context.Background(), node); err != nil || !ok {
			t.Errorf("InstanceExists = %v, %v", ok, err)
		}
	})
	t.Run("unreachable vCenter", func(t *testing.T) {
		e := vcenterEntry(s)
		e["server"] = "https://" + freePort(t)
		c := newCloudFrom(t, parseSettings(t, credentialFiles(t, simUser, simPassword), settingsJSON{VCenters: []map[string]any{e}}))
		checkNothingChanges(t, c, node, "", "connect")
	})
}

func errStrings(c *Cloud, node *corev1.Node) []string {
	var out []string
	if _, err := c.InstanceExists(context.Background(), node); err != nil {
		out = append(out, err.Error())
	}
	if _, err := c.InstanceMetadata(context.Background(), node); err != nil {
		out = append(out, err.Error())
	}
	return out
}

func TestTLS(t *testing.T) {
	s := startSim(t, withTLS())
	vms := guestAll(t, s, 1)
	node := newNode("n", withVM(vms[0]))
	caFile, err := s.server.CertificateFile()
	if err != nil {
		t.Fatal(err)
	}
	sha256 := soap.ThumbprintSHA256(s.server.Certificate())
	tests := []struct {
		name    string
		tweak   func(e map[string]any)
		wantErr string
	}{
		{"CA file", func(e map[string]any) { e["caFile"] = caFile }, ""},
		{"thumbprint", func(e map[string]any) { e["thumbprint"] = sha256 }, ""},
		{"insecure", func(e map[string]any) { e["insecure"] = true }, ""},
		{"system roots only", func(map[string]any) {}, "set caFile to the CA that signed it"},
		{"wrong thumbprint", func(e map[string]any) { e["thumbprint"] = strings.Repeat("AB:", 31) + "AB" }, "thumbprint does not match"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := vcenterEntry(s)
			u := url.URL{Scheme: "https", Host: s.server.URL.Host, Path: "/sdk"}
			e["server"] = u.String()
			delete(e, "thumbprint")
			tt.tweak(e)
			c := newCloudFrom(t, parseSettings(t, credentialFiles(t, simUser, simPassword), settingsJSON{VCenters: []map[string]any{e}}))
			ok, err := c.InstanceExists(context.Background(), node)
			if tt.wantErr == "" {
				if err != nil || !ok {
					t.Errorf("InstanceExists = %v, %v; want true", ok, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "vsphere.vcenters[0]") {
				t.Errorf("InstanceExists = %v, %v; want an error naming the vCenter's field and mentioning %q", ok, err, tt.wantErr)
			}
			if ue, isUser := backends.AsUserError(err); !isUser || ue.Reason != ReasonTLSConfig {
				t.Errorf("error %v is not a %s user error", err, ReasonTLSConfig)
			}
		})
	}
}
