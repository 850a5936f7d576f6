package vsconfig

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

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
		v, errs := ParseSection(raw, field.NewPath("backends").Index(0).Child("vsphere"), "/etc/ccm")
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
