package vsconfig

import (
	"fmt"
	"net"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// TestReview67AccessorsDoNotExposeTheSettings: URL and the subnet
// accessors are the parsed form of validated Settings, which the backend
// keeps (vcenter.cfg, the instances' address rules) for its lifetime and
// which are documented as set by ParseSection/Validate only. Before the
// move the fields were unexported; the accessors now hand out the
// Settings' own *url.URL and slices, so a caller's edit of what it was
// given changes which server the backend logs in to and which addresses
// it chooses, without a Validate.
func TestReview67AccessorsDoNotExposeTheSettings(t *testing.T) {
	v, errs := ParseSection(section(t, func(m map[string]any) {
		m["addresses"] = map[string]any{"internalSubnets": []any{"10.0.0.0/8"}, "excludeSubnets": []any{"10.9.0.0/16"}}
	}), field.NewPath("backends").Index(0).Child("vsphere"), "/etc/ccm")
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	s := v.(*Settings)
	u := s.VCenters[0].URL()
	u.Host = "elsewhere.example.com"
	if got := s.VCenters[0].URL().Host; got != "vc1.example.com" {
		t.Errorf("a caller's edit of URL()'s value changed the vCenter's server to %q", got)
	}
	// The parsed subnets are asked about, not handed out (they were
	// InternalNets()/ExcludeNets(), the Settings' own slices).
	a := s.Addresses
	for _, c := range []struct {
		ip                      string
		internal, ext, excluded bool
	}{
		{"10.1.2.3", true, false, false}, {"10.9.1.1", true, false, true}, {"192.0.2.1", false, false, false},
	} {
		ip := net.ParseIP(c.ip)
		if got := [3]bool{a.InInternalSubnets(ip), a.InExternalSubnets(ip), a.Excluded(ip)}; got != [3]bool{c.internal, c.ext, c.excluded} {
			t.Errorf("%s: internal, external, excluded = %v, want %v", c.ip, got, [3]bool{c.internal, c.ext, c.excluded})
		}
	}
	if !a.HasInternalSubnets() || a.HasExternalSubnets() {
		t.Errorf("HasInternalSubnets, HasExternalSubnets = %v, %v; want true, false", a.HasInternalSubnets(), a.HasExternalSubnets())
	}
}

// TestReview67SectionPathsAsBefore: FieldPath and the rate-limit errors of
// a vsphere section (validated through package limits now) are as before.
func TestReview67SectionPathsAsBefore(t *testing.T) {
	if got := (&Settings{}).FieldPath().String(); got != "vsphere" {
		t.Errorf("FieldPath of unparsed Settings = %q, want vsphere", got)
	}
	p := field.NewPath("backends").Index(3).Child("vsphere")
	v, errs := ParseSection(section(t, nil), p, "/etc/ccm")
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	if got := v.(*Settings).FieldPath().String(); got != "backends[3].vsphere" {
		t.Errorf("FieldPath = %q, want backends[3].vsphere", got)
	}
	_, errs = ParseSection(section(t, func(m map[string]any) {
		m["rateLimits"] = map[string]any{"ec2": map[string]any{}, "vcenter": map[string]any{"qps": -2, "mode": "weird"}}
	}), p, "/etc/ccm")
	want := `[backends[3].vsphere.rateLimits[ec2]: Unsupported value: "ec2": supported values: "vcenter", backends[3].vsphere.rateLimits[vcenter].qps: Invalid value: -2: must be a positive rate (requests a second), 0 for the default, or -1 to turn the bucket off, backends[3].vsphere.rateLimits[vcenter].mode: Unsupported value: "weird": supported values: "adaptive", "fixed"]`
	if got := fmt.Sprint(errs.ToAggregate()); got != want {
		t.Errorf("rateLimits errors:\n got %s\nwant %s", got, want)
	}
}
