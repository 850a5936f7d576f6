// Package vsid reads the identity a node gives of its vSphere VM: its
// providerID, vsphere://<bios-uuid>, and its system UUID. Package vsphere
// calls it.
//
// It imports the standard library only, so that its fuzz target builds
// quickly: hack/fuzz.sh compiles every dependency of a fuzz target's test
// binary with the fuzzer's instrumentation, and package vsphere's test
// binary depends on client-go and govmomi.
package vsid

import (
	"fmt"
	"regexp"
	"strings"
)

const (
	// Scheme is the providerID scheme of vSphere nodes. Never change it.
	Scheme = "vsphere"
	// ProviderIDPrefix starts every vSphere providerID, followed by the
	// VM's BIOS UUID in lower case. Never change it.
	ProviderIDPrefix = Scheme + "://"
)

// uuidRE matches a BIOS UUID as the backend writes it: in lower case.
var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// UUIDFromProviderID returns the BIOS UUID of a vsphere://<uuid> providerID.
func UUIDFromProviderID(providerID string) (string, error) {
	rest, ok := strings.CutPrefix(providerID, ProviderIDPrefix)
	uuid := strings.ToLower(strings.TrimSpace(rest))
	if !ok || !uuidRE.MatchString(uuid) {
		return "", fmt.Errorf("malformed providerID %q: want %s<bios-uuid>, e.g. %s4237c7d5-3b7e-4c26-9a0e-8f3c1a2b3c4d", providerID, ProviderIDPrefix, ProviderIDPrefix)
	}
	return uuid, nil
}

// SystemUUIDs are the BIOS UUIDs a reported system UUID may stand for: as
// written, and with its first three fields byte-swapped, as SMBIOS before
// 2.6 (older VM hardware) reports them.
func SystemUUIDs(reported string) []string {
	u := strings.ToLower(strings.TrimSpace(reported))
	if !uuidRE.MatchString(u) {
		return nil
	}
	swapped := swapBytes(u[0:8]) + "-" + swapBytes(u[9:13]) + "-" + swapBytes(u[14:18]) + u[18:]
	if swapped == u {
		return []string{u}
	}
	return []string{u, swapped}
}

// swapBytes reverses the byte order of a hex string.
func swapBytes(hex string) string {
	b := make([]byte, 0, len(hex))
	for i := len(hex) - 2; i >= 0; i -= 2 {
		b = append(b, hex[i], hex[i+1])
	}
	return string(b)
}
