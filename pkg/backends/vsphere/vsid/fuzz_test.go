package vsid

import (
	"strings"
	"testing"
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
		if uuid, err := UUIDFromProviderID(s); err == nil {
			if !uuidRE.MatchString(uuid) {
				t.Fatalf("accepted %q as UUID %q", s, uuid)
			}
			if again, err := UUIDFromProviderID(ProviderIDPrefix + uuid); err != nil || again != uuid {
				t.Fatalf("%q: canonical form %q does not round-trip: %q, %v", s, ProviderIDPrefix+uuid, again, err)
			}
		} else if !strings.Contains(err.Error(), "vsphere://<bios-uuid>") {
			t.Fatalf("error for %q does not say the format: %v", s, err)
		}
		cands := SystemUUIDs(s)
		for _, c := range cands {
			if !uuidRE.MatchString(c) {
				t.Fatalf("SystemUUIDs(%q) gave %q", s, c)
			}
		}
		if len(cands) == 2 {
			back := SystemUUIDs(cands[1])
			if len(back) != 2 || back[1] != cands[0] {
				t.Fatalf("swapping %q twice gives %v, want %q", s, back, cands[0])
			}
		}
	})
}
