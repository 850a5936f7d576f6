// Package scheme splits a Node's spec.providerID into its scheme and the
// rest. Package providerid calls it (providerid.Scheme).
//
// It imports the standard library only, so that its fuzz target builds
// quickly: hack/fuzz.sh compiles every dependency of a fuzz target's test
// binary with the fuzzer's instrumentation, and package providerid
// imports k8s.io/api/core/v1 for its node-platform functions.
package scheme

import (
	"fmt"
	"strings"
)

// Of returns the scheme of a providerID ("aws" for "aws:///us-east-1a/i-1").
// A providerID without "://" or with an empty or non-alphanumeric scheme is
// an error that says what a providerID looks like.
func Of(providerID string) (string, error) {
	scheme, rest, ok := strings.Cut(providerID, "://")
	if !ok {
		return "", fmt.Errorf("malformed providerID %q: want <scheme>://<id>, e.g. baremetal://bm-1", providerID)
	}
	if !validScheme(scheme) {
		return "", fmt.Errorf("malformed providerID %q: scheme %q must be lower-case letters, digits and dashes", providerID, scheme)
	}
	if strings.Trim(rest, "/") == "" {
		return "", fmt.Errorf("malformed providerID %q: nothing after %s://", providerID, scheme)
	}
	return scheme, nil
}

func validScheme(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '-' {
			return false
		}
	}
	return true
}
