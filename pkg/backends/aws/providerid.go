package aws

import (
	"fmt"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// reasonInvalidProviderID is the event reason of a providerID with the aws
// scheme that does not parse; every backend gives its scheme's this reason.
const reasonInvalidProviderID = "InvalidProviderID"

// reasonOutsideRegion is the event reason of a node whose providerID (or,
// without a zone in it, whose region or zone label) names a zone outside
// the backend's region.
const reasonOutsideRegion = "NodeOutsideRegion"

var (
	instanceIDRE = regexp.MustCompile(`^i-[0-9a-f]{8,17}$`)
	// zoneRE is an Availability Zone or Local Zone name.
	zoneRE = regexp.MustCompile(`^[a-z0-9-]+$`)
)

// parseProviderID returns the instance ID of an AWS providerID (see
// splitProviderID).
func parseProviderID(providerID string) (string, error) {
	_, id, err := splitProviderID(providerID)
	return id, err
}

// splitProviderID returns the zone ("" when the providerID names none) and
// the instance ID of an AWS providerID. It accepts the forms the upstream
// AWS provider accepts: aws:///<zone>/<id> (what it writes), aws:////<id>,
// aws:///<id> and aws://<zone>/<id>; the scheme in lower case, as the
// router dispatches it, and nothing after the ID (no trailing slash, query
// or fragment). It is parsed by hand: url.Parse lower-cases the scheme,
// decodes escapes and drops fragments, so it accepted IDs that are not what
// the node carries. A providerID that does not parse is a user error with
// reason InvalidProviderID.
func splitProviderID(providerID string) (zone, id string, err error) {
	rest, ok := strings.CutPrefix(providerID, Scheme+"://")
	if !ok {
		return "", "", invalidProviderID(fmt.Errorf("providerID %q is not an AWS providerID: want aws:///<zone>/<instance-id>", providerID))
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
		return "", "", invalidProviderID(fmt.Errorf("providerID %q names no EC2 instance: want aws:///<zone>/i-<hex>, e.g. aws:///eu-west-1a/i-0123456789abcdef0", providerID))
	}
	return zone, id, nil
}

// isInstanceID reports whether s is an EC2 instance ID, as instanceIDRE
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

// regionalInstanceID returns the instance ID of node's providerID when the
// node is one of region's (see checkRegion).
func regionalInstanceID(node *corev1.Node, region string) (string, error) {
	zone, id, err := splitProviderID(node.Spec.ProviderID)
	if err != nil {
		return "", err
	}
	if err := checkRegion(node, zone, region); err != nil {
		return "", err
	}
	return id, nil
}

func invalidProviderID(err error) error {
	return backends.NewUserError(reasonInvalidProviderID, fmt.Errorf("spec.providerID: %w", err))
}

// providerID builds the providerID the upstream AWS provider writes.
func providerID(zone, instanceID string) string {
	return fmt.Sprintf("%s:///%s/%s", Scheme, zone, instanceID)
}

// zoneInRegion reports whether zone is one of region's zones: an
// Availability Zone (the region and one letter, eu-west-1a) or a Local or
// Wavelength Zone (the region, a dash and more: us-west-2-lax-1a,
// us-east-1-wl1-bos-wlz-1).
func zoneInRegion(zone, region string) bool {
	rest, ok := strings.CutPrefix(zone, region)
	if !ok {
		return false
	}
	return (len(rest) == 1 && rest[0] >= 'a' && rest[0] <= 'z') || (len(rest) > 1 && rest[0] == '-')
}

// checkRegion returns an error when node is, by its providerID's zone or,
// without one, by its region or zone label, a node of another region. EC2
// instance IDs are unique per region only, and a lookup here of another
// region's instance answers "does not exist": that must never delete the
// node of a region this backend does not serve (its backend removed from
// the config, or never there).
//
// A providerID's first token that is the region itself
// (aws://eu-west-1/i-...: the upstream provider ignores that token) names
// no zone: the labels decide, as without one.
func checkRegion(node *corev1.Node, zone, region string) error {
	if zone != "" && zone != region {
		if !zoneInRegion(zone, region) {
			return outsideRegion(fmt.Errorf("spec.providerID %q names zone %s, which is not in region %s", node.Spec.ProviderID, zone, region))
		}
		return nil
	}
	for _, key := range []string{corev1.LabelTopologyRegion, corev1.LabelFailureDomainBetaRegion} {
		if v, ok := node.Labels[key]; ok && v != region {
			return outsideRegion(fmt.Errorf("label %s=%s is not region %s", key, v, region))
		}
	}
	for _, key := range []string{corev1.LabelTopologyZone, corev1.LabelFailureDomainBetaZone} {
		if v, ok := node.Labels[key]; ok && !zoneInRegion(v, region) {
			return outsideRegion(fmt.Errorf("label %s=%s is not a zone of region %s", key, v, region))
		}
	}
	return nil
}

func outsideRegion(err error) error {
	return backends.NewUserError(reasonOutsideRegion, fmt.Errorf("%w: the node is not this backend's; configure an aws backend for its region (it is never deleted for being unknown here)", err))
}
