// Package chartschema checks the Helm chart's values schema against the
// backend types a binary registers: the schema lists the types a cloud-config
// in the chart's values may name (config.backends[].type), and a type the
// binary knows but the schema lacks fails only at helm install.
package chartschema

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Path is the values schema, from the repository root.
const Path = "charts/multicloud-ccm/values.schema.json"

// Load reads the values schema from the repository holding the working
// directory (a test's package folder, say).
func Load() ([]byte, error) {
	dir, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, Path)) //nolint:gosec // The repository's chart.
		if err == nil {
			return data, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return nil, fmt.Errorf("no %s above the working directory", Path)
		}
		dir = parent
	}
}

// Pointer is the JSON pointer, in the schema, of the backend types' enum:
// config.backends[].type, checked once the config is given (the "then" of
// the config's "if").
const Pointer = "/properties/config/then/properties/backends/items/properties/type/enum"

// BackendTypes returns the schema's list of backend types, at Pointer.
func BackendTypes(schema []byte) ([]string, error) {
	var node any
	if err := json.Unmarshal(schema, &node); err != nil {
		return nil, fmt.Errorf("%s: %w", Path, err)
	}
	for _, key := range strings.Split(strings.TrimPrefix(Pointer, "/"), "/") {
		m, _ := node.(map[string]any)
		node = m[key]
	}
	list, _ := node.([]any)
	types := make([]string, 0, len(list))
	for _, v := range list {
		if t, ok := v.(string); ok {
			types = append(types, t)
		}
	}
	if len(types) == 0 {
		return nil, fmt.Errorf("%s: no list of backend types at %s", Path, Pointer)
	}
	return types, nil
}

// CheckBackendTypes compares the schema's backend types with the registered
// ones (backends.Types()). A registered type missing from the schema (the
// chart refuses a config the binary accepts) and a schema type nobody
// registered (the chart accepts a config the binary refuses) are each an
// error naming the type.
func CheckBackendTypes(schema []byte, registered []string) error {
	listed, err := BackendTypes(schema)
	if err != nil {
		return err
	}
	var errs []error
	for _, t := range registered {
		if !slices.Contains(listed, t) {
			errs = append(errs, fmt.Errorf("backend type %q is registered but missing from %s: add it to the enum of config.backends[].type", t, Path))
		}
	}
	for _, t := range listed {
		if !slices.Contains(registered, t) {
			errs = append(errs, fmt.Errorf("backend type %q is in %s but no backend registers it: remove it, or compile its package into the binary", t, Path))
		}
	}
	return errors.Join(errs...)
}
