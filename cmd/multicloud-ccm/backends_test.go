package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
)

// TestCompiledInBackends: backends.go compiles in the four backend types,
// each registered with the router's registry and the config parser alike,
// and "config validate --help" lists them from the registry.
func TestCompiledInBackends(t *testing.T) {
	want := []string{"aws", "baremetal", "openstack", "vsphere"}
	if got := backends.Types(); !slices.Equal(got, want) {
		t.Errorf("backends.Types() = %v, want %v", got, want)
	}
	if got := config.RegisteredTypes(); !slices.Equal(got, want) {
		t.Errorf("config.RegisteredTypes() = %v, want %v", got, want)
	}
	out, _, err := run(t, "validate", "--help")
	if err != nil {
		t.Fatal(err)
	}
	if line := "Backend types compiled in: " + strings.Join(want, ", ") + "."; !strings.Contains(out, line) {
		t.Errorf("help does not say %q:\n%s", line, out)
	}
}
