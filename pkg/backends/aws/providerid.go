package aws

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends/aws/awsid"
)

// reasonInvalidProviderID is the event reason of a providerID with the aws
// scheme that does not parse; every backend gives its scheme's this reason.
const reasonInvalidProviderID = "InvalidProviderID"

// reasonOutsideRegion is the event reason of a node whose providerID (or,
// without a zone in it, whose region or zone label) names a zone outside
// the backend's region.
const reasonOutsideRegion = "NodeOutsideRegion"

// instanceIDRE matches an EC2 instance ID (awsid.InstanceIDRE).
var instanceIDRE = awsid.InstanceIDRE

// parseProviderID returns the instance ID of an AWS providerID (see
// splitProviderID).
func parseProviderID(providerID string) (string, error) {
	_, id, err := splitProviderID(providerID)
	return id, err
}

// splitProviderID returns the zone ("" when the providerID names none) and
// the instance ID of an AWS providerID, as awsid.SplitProviderID parses it
// (the forms the upstream AWS provider accepts). A providerID that does not
// parse is a user error with reason InvalidProviderID.
func splitProviderID(providerID string) (zone, id string, err error) {
	zone, id, err = awsid.SplitProviderID(providerID)
	if err != nil {
		return "", "", invalidProviderID(err)
	}
	return zone, id, nil
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

// providerID builds the providerID the upstream AWS provider writes
// (awsid.ProviderID).
func providerID(zone, instanceID string) string {
	return awsid.ProviderID(zone, instanceID)
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
