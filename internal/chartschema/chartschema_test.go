package chartschema

import (
	"slices"
	"strings"
	"testing"
)

func TestBackendTypes(t *testing.T) {
	schema, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	types, err := BackendTypes(schema)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(types, "baremetal") {
		t.Errorf("schema types = %v, want baremetal among them", types)
	}
	if _, err := BackendTypes([]byte(`{"properties": {}}`)); err == nil {
		t.Error("a schema without the enum was accepted")
	}
}

func TestCheckBackendTypes(t *testing.T) {
	schema := []byte(`{"properties": {"config": {"then": {"properties": {"backends": {"items": {"properties": {"type": {"enum": ["a", "b"]}}}}}}}}}`)
	if err := CheckBackendTypes(schema, []string{"b", "a"}); err != nil {
		t.Errorf("same types: %v", err)
	}
	err := CheckBackendTypes(schema, []string{"a", "c"})
	if err == nil {
		t.Fatal("a registered type missing from the schema passed")
	}
	for _, want := range []string{`"c" is registered but missing from ` + Path, `"b" is in ` + Path + ` but no backend registers it`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}
