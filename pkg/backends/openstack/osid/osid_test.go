package osid

import (
	"strings"
	"testing"
)

const uuidA = "0b9e3f4a-1c2d-4e5f-8a9b-0c1d2e3f4a5b"

func TestParseProviderID(t *testing.T) {
	tests := []struct {
		in, id, region, err string
	}{
		{in: "openstack:///" + uuidA, id: uuidA},
		{in: "openstack://RegionOne/" + uuidA, id: uuidA, region: "RegionOne"},
		{in: "openstack:///not-a-uuid", err: "malformed"},
		{in: "openstack://" + uuidA, err: "malformed"},
		{in: "openstack:///" + uuidA + "/x", err: "malformed"},
		{in: "openstack:///", err: "malformed"},
		{in: "openstack://RegionOne/", err: "malformed"},
		{in: "aws:///us-east-1a/i-0123", err: "not an OpenStack one"},
		{in: "", err: "not an OpenStack one"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			id, region, err := ParseProviderID(tt.in)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want one containing %q", err, tt.err)
				}
				return
			}
			if err != nil || id != tt.id || region != tt.region {
				t.Fatalf("got %q %q %v, want %q %q", id, region, err, tt.id, tt.region)
			}
		})
	}
}

// FuzzParseProviderID: any string either fails to parse or round-trips
// through the form the backend writes.
func FuzzParseProviderID(f *testing.F) {
	for _, s := range []string{"openstack:///" + uuidA, "openstack://RegionOne/" + uuidA, "openstack://", "openstack:///", "aws:///x/i-1", "openstack://a/b/c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		id, region, err := ParseProviderID(in)
		if err != nil {
			return
		}
		if got := ProviderID(region, id); got != in {
			t.Fatalf("ParseProviderID(%q) = %q, %q; written back as %q", in, id, region, got)
		}
	})
}
