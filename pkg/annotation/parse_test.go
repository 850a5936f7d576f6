package annotation

import (
	"strings"
	"testing"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation/values"
)

// TestValuesNames checks that package values, which parses LoadBalancerIPs
// and AllowSharedIP (its tests and fuzz targets are there), quotes the
// names the docs are generated from, and that the wrappers here call it.
func TestValuesNames(t *testing.T) {
	for _, tt := range []struct {
		name   Name
		theirs string
		parse  func(string) error
	}{
		{LoadBalancerIPs, values.LoadBalancerIPs, func(v string) error { _, err := ParseLoadBalancerIPs(v); return err }},
		{AllowSharedIP, values.AllowSharedIP, func(v string) error { _, err := ParseAllowSharedIP(v); return err }},
	} {
		if string(tt.name) != tt.theirs {
			t.Errorf("package values names %s %q", tt.name, tt.theirs)
		}
		if err := tt.parse(" "); err == nil || !strings.Contains(err.Error(), string(tt.name)) {
			t.Errorf("parsing an empty %s: %v, want an error naming it", tt.name, err)
		}
	}
}
