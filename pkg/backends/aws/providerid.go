package aws

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
)

var instanceIDRE = regexp.MustCompile(`^i-[0-9a-f]{8,17}$`)

// parseProviderID returns the instance ID of an AWS providerID. It accepts
// the forms the upstream AWS provider accepts: aws:///<zone>/<id> (what it
// writes), aws:////<id>, aws:///<id> and aws://<zone>/<id>; the scheme in
// lower case, as the router dispatches it, and nothing after the ID.
func parseProviderID(providerID string) (string, error) {
	u, err := url.Parse(providerID)
	if err != nil || !strings.HasPrefix(providerID, Scheme+"://") {
		return "", fmt.Errorf("providerID %q is not an AWS providerID: want aws:///<zone>/<instance-id>", providerID)
	}
	if u.User != nil || u.RawQuery != "" || u.ForceQuery || strings.Contains(providerID, "#") {
		return "", fmt.Errorf("providerID %q has a user, query or fragment: want aws:///<zone>/<instance-id>", providerID)
	}
	tokens := strings.Split(strings.Trim(u.Path, "/"), "/")
	id := tokens[len(tokens)-1]
	if len(tokens) > 2 || !instanceIDRE.MatchString(id) {
		return "", fmt.Errorf("providerID %q names no EC2 instance: want aws:///<zone>/i-<hex>", providerID)
	}
	return id, nil
}

// providerID builds the providerID the upstream AWS provider writes.
func providerID(zone, instanceID string) string {
	return fmt.Sprintf("%s:///%s/%s", Scheme, zone, instanceID)
}
