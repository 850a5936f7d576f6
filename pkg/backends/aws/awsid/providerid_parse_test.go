package awsid

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// splitProviderIDByRegexp is SplitProviderID as it was written before it
// was checked by hand: the oracle the hand-written one must agree with.
func splitProviderIDByRegexp(providerID string) (zone, id string, ok bool) {
	rest, ok := strings.CutPrefix(providerID, Scheme+"://")
	if !ok {
		return "", "", false
	}
	tokens := strings.Split(strings.TrimPrefix(strings.TrimPrefix(rest, "/"), "/"), "/")
	id = tokens[len(tokens)-1]
	if len(tokens) > 2 || (len(tokens) == 2 && !zoneRE.MatchString(tokens[0])) || !InstanceIDRE.MatchString(id) {
		return "", "", false
	}
	if len(tokens) == 2 {
		zone = tokens[0]
	}
	return zone, id, true
}

// TestSplitProviderIDAgreesWithRegexps: the hand-written check accepts
// exactly what the regexps accepted, with the same zone and ID, on the
// forms upstream accepts, their near misses, and 200,000 random strings
// over the characters that matter.
func TestSplitProviderIDAgreesWithRegexps(t *testing.T) {
	inputs := []string{
		"aws:///eu-west-1a/i-0123456789abcdef0", "aws:////i-01234567", "aws:///i-01234567", "aws://eu-west-1a/i-01234567",
		"aws:///a/b/i-01234567", "aws:///eu-west-1a/", "aws:///", "aws://", "aws:///eu-west-1a/i-0123456", "aws:///eu-west-1a/i-0123456789abcdef01",
		"aws:///eu-west-1a/i-0123456789ABCDEF", "aws:///EU/i-01234567", "aws:///eu_west/i-01234567", "aws:///eu-west-1a/i-01234567/",
		"aws:////eu-west-1a/i-01234567", "aws:///eu-west-1a//i-01234567", "AWS:///eu-west-1a/i-01234567", "gce:///p/z/i-1",
		"aws:///%zz/i-01234567", "aws:///us-west-2-lax-1a/i-0abcdef12", "aws:///eu-west-1a/j-01234567", "",
	}
	rng := rand.New(rand.NewPCG(42, 42))
	const alphabet = "ai-0f9gzA/_:"
	for range 200_000 {
		var b strings.Builder
		b.WriteString("aws://")
		for range rng.IntN(24) {
			b.WriteByte(alphabet[rng.IntN(len(alphabet))])
		}
		inputs = append(inputs, b.String())
		// And near the valid form: a zone, an ID of random length.
		inputs = append(inputs, "aws:///"+strings.Repeat("a", rng.IntN(2))+"/i-"+strings.Repeat("0f", rng.IntN(10))+strings.Repeat("9", rng.IntN(2)))
	}
	for _, in := range inputs {
		zone, id, err := SplitProviderID(in)
		wantZone, wantID, ok := splitProviderIDByRegexp(in)
		if (err == nil) != ok || zone != wantZone || id != wantID {
			t.Fatalf("SplitProviderID(%q) = %q, %q, %v; the regexps: %q, %q, ok %v", in, zone, id, err, wantZone, wantID, ok)
		}
	}
}
