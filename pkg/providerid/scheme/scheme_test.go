package scheme

import (
	"strings"
	"testing"
)

func TestOf(t *testing.T) {
	tests := []struct {
		id      string
		want    string
		wantErr string
	}{
		{id: "aws:///us-east-1a/i-0123456789abcdef0", want: "aws"},
		{id: "openstack:///8f5b7b4e-1c1a-4f0e-9d3b-0f3b4c9a2d11", want: "openstack"},
		{id: "openstack://RegionOne/8f5b7b4e-1c1a-4f0e-9d3b-0f3b4c9a2d11", want: "openstack"},
		{id: "vsphere://4237e4a8-3c1b-1d4f-9a6e-7b8c9d0e1f2a", want: "vsphere"},
		{id: "baremetal://bm-1", want: "baremetal"},
		{id: "kind://docker/kind/kind-worker", want: "kind"},
		{id: "metal3://metal3/bmh-0/cluster-m3m-abc", want: "metal3"},
		{id: "metal3://1f2e3d4c-5b6a-4798-8a9b-0c1d2e3f4a5b", want: "metal3"},
		{id: "my-cloud2://x", want: "my-cloud2"},
		{id: "", wantErr: "want <scheme>://<id>"},
		{id: "bm-1", wantErr: "want <scheme>://<id>"},
		{id: "baremetal:/bm-1", wantErr: "want <scheme>://<id>"},
		{id: "://bm-1", wantErr: `scheme ""`},
		{id: "AWS:///us-east-1a/i-1", wantErr: "lower-case"},
		{id: "bare metal://bm-1", wantErr: "lower-case"},
		{id: "baremetal://", wantErr: "nothing after baremetal://"},
		{id: "aws:///", wantErr: "nothing after aws://"},
	}
	for _, tc := range tests {
		t.Run(tc.id, func(t *testing.T) {
			got, err := Of(tc.id)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Of(%q) = %q, %v; want error containing %q", tc.id, got, err, tc.wantErr)
				}
				if !strings.Contains(err.Error(), "e.g.") && !strings.Contains(err.Error(), "must be") && !strings.Contains(err.Error(), "nothing after") {
					t.Errorf("error %q does not say what a providerID looks like", err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Of(%q) = %q, %v; want %q", tc.id, got, err, tc.want)
			}
		})
	}
}

// FuzzScheme: Of never panics; what it accepts is a non-empty scheme of
// lower-case letters, digits and dashes that prefixes the input with "://",
// followed by something other than slashes.
func FuzzScheme(f *testing.F) {
	for _, s := range []string{"aws:///us-east-1a/i-1", "baremetal://bm-1", "openstack://r/u", "", "://", "a://", "a:///", "x://://", "é://x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		scheme, err := Of(id)
		if err != nil {
			if scheme != "" {
				t.Fatalf("Of(%q) returned %q with error %v", id, scheme, err)
			}
			if !strings.Contains(err.Error(), "malformed providerID") {
				t.Fatalf("error %q does not say the providerID is malformed", err)
			}
			return
		}
		if !validScheme(scheme) {
			t.Fatalf("Of(%q) = %q, not a valid scheme", id, scheme)
		}
		rest, ok := strings.CutPrefix(id, scheme+"://")
		if !ok || strings.Trim(rest, "/") == "" {
			t.Fatalf("Of(%q) = %q, but the input is not <scheme>://<id>", id, scheme)
		}
	})
}
