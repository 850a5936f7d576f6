// Package osid reads and writes the providerIDs of OpenStack nodes, the
// way the upstream OpenStack provider writes them, and holds the form of
// an OpenStack resource ID. Package openstack calls it.
//
// It imports the standard library only, so that its fuzz target builds
// quickly: hack/fuzz.sh compiles every dependency of a fuzz target's test
// binary with the fuzzer's instrumentation, and package openstack's test
// binary depends on client-go and gophercloud.
package osid

import (
	"fmt"
	"regexp"
	"strings"
)

// Scheme is the providerID scheme of OpenStack nodes, exactly as the
// upstream OpenStack provider writes it. Never change it.
const Scheme = "openstack"

// UUIDRE matches an OpenStack resource ID: a UUID, its dashes optional,
// in either case.
var UUIDRE = regexp.MustCompile(`^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$`)

// ParseProviderID returns the server UUID and the region (empty for
// openstack:///<uuid>) of an OpenStack providerID, or an error saying the
// form it wants.
func ParseProviderID(providerID string) (id, region string, err error) {
	rest, ok := strings.CutPrefix(providerID, Scheme+"://")
	if !ok {
		return "", "", fmt.Errorf("providerID %q is not an OpenStack one: want %s:///<server-uuid> or %s://<region>/<server-uuid>", providerID, Scheme, Scheme)
	}
	region, id, ok = strings.Cut(rest, "/")
	if !ok || id == "" || strings.Contains(id, "/") || !UUIDRE.MatchString(id) {
		return "", "", fmt.Errorf("providerID %q is malformed: want %s:///<server-uuid> or %s://<region>/<server-uuid>", providerID, Scheme, Scheme)
	}
	return id, region, nil
}

// ProviderID writes the providerID of server id the way the upstream
// OpenStack provider does: openstack://<region>/<id>, or openstack:///<id>
// when region is empty.
func ProviderID(region, id string) string {
	return fmt.Sprintf("%s://%s/%s", Scheme, region, id)
}
