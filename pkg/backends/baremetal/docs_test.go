package baremetal

import (
	"os"
	"regexp"
	"slices"
	"testing"
)

// TestDocumentedReasons: the event reasons docs/baremetal.md promises are
// exactly the reasons the backend gives, so a Warning event a user looks up
// is there, and none the backend gives is left out.
func TestDocumentedReasons(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/baremetal.md")
	if err != nil {
		t.Fatal(err)
	}
	table := regexp.MustCompile("(?s)\\| reason \\| cause \\|\n(.*?)\n\n").FindSubmatch(doc)
	if table == nil {
		t.Fatal("docs/baremetal.md has no | reason | cause | table")
	}
	var documented []string
	for _, m := range regexp.MustCompile("(?m)^\\| `([A-Z][A-Za-z]+)` \\|").FindAllSubmatch(table[1], -1) {
		documented = append(documented, string(m[1]))
	}
	// Reasons named in prose: `LoadBalancerIPReplaced`, `InvalidProviderID`.
	for _, r := range []string{ReasonIPReplaced, ReasonInvalidProviderID} {
		if !regexp.MustCompile("`" + r + "`").Match(doc) {
			t.Errorf("docs/baremetal.md does not name reason %s", r)
		}
	}
	given := []string{
		ReasonInvalidLoadBalancerIPs, ReasonInvalidAllowSharedIP, ReasonUnknownAddressPool, ReasonAddressPoolNotAllowed,
		ReasonIPNotInPool, ReasonIPInUse, ReasonIPFamilyUnavailable, ReasonAddressPoolExhausted,
	}
	slices.Sort(documented)
	slices.Sort(given)
	if !slices.Equal(documented, given) {
		t.Errorf("the reasons table of docs/baremetal.md lists %v; the load balancer gives %v", documented, given)
	}
}
