package chart

import (
	"testing"

	"github.com/multicloud-ccm/multicloud-ccm/internal/chartschema"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// TestSchemaBackendTypes: the values schema lists exactly the backend types
// the binary registers (this package imports the same four as
// cmd/multicloud-ccm/backends.go), so a new type cannot be forgotten there.
func TestSchemaBackendTypes(t *testing.T) {
	schema, err := chartschema.Load()
	if err != nil {
		t.Fatal(err)
	}
	if err := chartschema.CheckBackendTypes(schema, backends.Types()); err != nil {
		t.Error(err)
	}
}
