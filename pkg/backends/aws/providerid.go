package aws

import (
	"fmt"
	"regexp"
	"strings"
)

var (
	instanceIDRE = regexp.MustCompile(`^i-[0-9a-f]{8,17}$`)
	// zoneRE is an Availability Zone or Local Zone name.
	zoneRE = regexp.MustCompile(`^[a-z0-9-]+$`)
)

// parseProviderID returns the instance ID of an AWS providerID. It accepts
// the forms the upstream AWS provider accepts: aws:///<zone>/<id> (what it
// writes), aws:////<id>, aws:///<id> and aws://<zone>/<id>; the scheme in
// lower case, as the router dispatches it, and nothing after the ID (no
// trailing slash, query or fragment). It is parsed by hand: url.Parse
// lower-cases the scheme, decodes escapes and drops fragments, so it
// accepted IDs that are not what the node carries.
func parseProviderID(providerID string) (string, error) {
	rest, ok := strings.CutPrefix(providerID, Scheme+"://")
	if !ok {
		return "", fmt.Errorf("providerID %q is not an AWS providerID: want aws:///<zone>/<instance-id>", providerID)
	}
	tokens := strings.Split(strings.TrimPrefix(strings.TrimPrefix(rest, "/"), "/"), "/")
	id := tokens[len(tokens)-1]
	if len(tokens) > 2 || (len(tokens) == 2 && !zoneRE.MatchString(tokens[0])) || !instanceIDRE.MatchString(id) {
		return "", fmt.Errorf("providerID %q names no EC2 instance: want aws:///<zone>/i-<hex>", providerID)
	}
	return id, nil
}

// providerID builds the providerID the upstream AWS provider writes.
func providerID(zone, instanceID string) string {
	return fmt.Sprintf("%s:///%s/%s", Scheme, zone, instanceID)
}
