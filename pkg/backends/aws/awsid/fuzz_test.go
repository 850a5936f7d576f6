package awsid

import (
	"strings"
	"testing"
)

// FuzzParseProviderID: parsing never panics, accepts only IDs of the form
// i-<hex>, and the form the backend writes parses back to the same ID.
func FuzzParseProviderID(f *testing.F) {
	for _, s := range []string{"aws:///eu-west-1a/i-0123456789abcdef0", "aws:////i-01234567", "aws://eu-west-1a/i-01234567",
		"aws:///a/b/i-01234567", "gce:///p/z/i-1", "aws:///%zz/i-01234567", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		id, err := ParseProviderID(in)
		if err != nil {
			return
		}
		if !InstanceIDRE.MatchString(id) || !strings.HasSuffix(in, id) {
			t.Fatalf("ParseProviderID(%q) = %q", in, id)
		}
		if again, err := ParseProviderID(ProviderID("eu-west-1a", id)); err != nil || again != id {
			t.Fatalf("round trip of %q: %q, %v", id, again, err)
		}
	})
}
