package vsphere

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// FuzzNodeIdentity checks the parsers of what a node says about its VM: a
// providerID the parser accepts round-trips to a canonical lower-case
// vsphere://<uuid>, and the system-UUID candidates are valid UUIDs whose
// byte swap undoes itself.
func FuzzNodeIdentity(f *testing.F) {
	for _, s := range []string{
		"vsphere://4237c7d5-3b7e-4c26-9a0e-8f3c1a2b3c4d",
		"vsphere://4237C7D5-3B7E-4C26-9A0E-8F3C1A2B3C4D",
		"56492E42-22AD-3911-6D72-59CC8F26BC90",
		"vsphere:///x", "", "aws:///us-east-1a/i-1",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if uuid, err := uuidFromProviderID(s); err == nil {
			if !uuidRE.MatchString(uuid) {
				t.Fatalf("accepted %q as UUID %q", s, uuid)
			}
			if again, err := uuidFromProviderID(ProviderIDPrefix + uuid); err != nil || again != uuid {
				t.Fatalf("%q: canonical form %q does not round-trip: %q, %v", s, ProviderIDPrefix+uuid, again, err)
			}
		} else if !strings.Contains(err.Error(), "vsphere://<bios-uuid>") {
			t.Fatalf("error for %q does not say the format: %v", s, err)
		}
		cands := systemUUIDs(s)
		for _, c := range cands {
			if !uuidRE.MatchString(c) {
				t.Fatalf("systemUUIDs(%q) gave %q", s, c)
			}
		}
		if len(cands) == 2 {
			back := systemUUIDs(cands[1])
			if len(back) != 2 || back[1] != cands[0] {
				t.Fatalf("swapping %q twice gives %v, want %q", s, back, cands[0])
			}
		}
	})
}

// FuzzParseSection feeds arbitrary sections to the parser: it never
// panics, and a section it accepts has every vCenter's URL resolved and the
// defaults set.
func FuzzParseSection(f *testing.F) {
	for _, s := range []string{
		`{"vcenters":[{"server":"vc","datacenters":["dc"],"username":{"env":"U"},"password":{"env":"P"}}]}`,
		`{"vcenters":[{"server":"https://vc:8443/sdk","datacenters":["dc"],"username":{"file":"u"},"password":{"file":"p"},"thumbprint":"AA:BB"}],"addresses":{"internalSubnets":["10.0.0.0/8"],"ipFamilies":["ipv6","ipv4"]}}`,
		`{"vcenters":[]}`, `{}`, `[]`, `{"refreshInterval":"-1s"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		v, errs := parseSection(raw, field.NewPath("backends").Index(0).Child("vsphere"), "/etc/ccm")
		if len(errs) > 0 {
			if v != nil {
				t.Fatalf("errors %v with a value", errs)
			}
			return
		}
		s := v.(*Settings)
		if len(s.VCenters) == 0 || s.RefreshInterval.Duration < minRefreshInterval || s.RequestTimeout.Duration <= 0 || len(s.Addresses.IPFamilies) == 0 {
			t.Fatalf("accepted an invalid section: %+v", s)
		}
		for i, vc := range s.VCenters {
			if vc.url == nil || vc.url.Host == "" || len(vc.Datacenters) == 0 {
				t.Fatalf("vcenters[%d] accepted without a server or datacenters: %+v", i, vc)
			}
			if vc.Insecure && (vc.CAFile != "" || vc.Thumbprint != "") {
				t.Fatalf("vcenters[%d]: insecure accepted together with a CA or thumbprint", i)
			}
		}
	})
}
