// Package awsid reads and writes the providerIDs of EC2 nodes, the way the
// upstream AWS provider writes and accepts them. Package aws calls it.
//
// It imports the standard library only, so that its fuzz target builds
// quickly: hack/fuzz.sh compiles every dependency of a fuzz target's test
// binary with the fuzzer's instrumentation, and package aws's test binary
// depends on client-go and the AWS SDK.
package awsid

import (
	"fmt"
	"regexp"
	"strings"
)

// Scheme is the providerID scheme of EC2 nodes, as in
// aws:///eu-west-1a/i-0123456789abcdef0. It never changes: Nodes and CSI
// drivers rely on it.
const Scheme = "aws"

var (
	// InstanceIDRE matches an EC2 instance ID: i- and 8 to 17 lower-case
	// hex digits.
	InstanceIDRE = regexp.MustCompile(`^i-[0-9a-f]{8,17}$`)
	// zoneRE is an Availability Zone or Local Zone name.
	zoneRE = regexp.MustCompile(`^[a-z0-9-]+$`)
)

// ParseProviderID returns the instance ID of an AWS providerID (see
// SplitProviderID).
func ParseProviderID(providerID string) (string, error) {
	_, id, err := SplitProviderID(providerID)
	return id, err
}

// SplitProviderID returns the zone ("" when the providerID names none) and
// the instance ID of an AWS providerID. It accepts the forms the upstream
// AWS provider accepts: aws:///<zone>/<id> (what it writes), aws:////<id>,
// aws:///<id> and aws://<zone>/<id>; the scheme in lower case, as the
// router dispatches it, and nothing after the ID (no trailing slash, query
// or fragment). It is parsed by hand: url.Parse lower-cases the scheme,
// decodes escapes and drops fragments, so it accepted IDs that are not what
// the node carries.
func SplitProviderID(providerID string) (zone, id string, err error) {
	rest, ok := strings.CutPrefix(providerID, Scheme+"://")
	if !ok {
		return "", "", fmt.Errorf("providerID %q is not an AWS providerID: want aws:///<zone>/<instance-id>", providerID)
	}
	rest = strings.TrimPrefix(strings.TrimPrefix(rest, "/"), "/")
	// At most two tokens, <zone>/<id> or <id>, checked without a regexp
	// or a split: the router and the backend parse every target node's
	// providerID on every call (5 passes over 1,000 targets per NLB
	// created), where the regexps and the split cost 0.46 ms a Service.
	zone, id, two := strings.Cut(rest, "/")
	if !two {
		zone, id = "", rest
	}
	if strings.Contains(id, "/") || (two && !isZoneName(zone)) || !isInstanceID(id) {
		return "", "", fmt.Errorf("providerID %q names no EC2 instance: want aws:///<zone>/i-<hex>, e.g. aws:///eu-west-1a/i-0123456789abcdef0", providerID)
	}
	return zone, id, nil
}

// isInstanceID reports whether s is an EC2 instance ID, as InstanceIDRE
// matches it: i- and 8 to 17 lower-case hex digits.
func isInstanceID(s string) bool {
	hex, ok := strings.CutPrefix(s, "i-")
	if !ok || len(hex) < 8 || len(hex) > 17 {
		return false
	}
	for i := range len(hex) {
		if c := hex[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// isZoneName reports whether s is an Availability Zone or Local Zone
// name, as zoneRE matches it: lower-case letters, digits and dashes.
func isZoneName(s string) bool {
	if s == "" {
		return false
	}
	for i := range len(s) {
		if c := s[i]; (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}

// ProviderID builds the providerID the upstream AWS provider writes.
func ProviderID(zone, instanceID string) string {
	return fmt.Sprintf("%s:///%s/%s", Scheme, zone, instanceID)
}
