package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
)

// paths lists the field paths of the problems in err ("" for a problem of
// the file as a whole), in order.
func paths(t *testing.T, err error) []string {
	t.Helper()
	var agg utilerrors.Aggregate
	if !errors.As(err, &agg) {
		t.Fatalf("error %v is not an aggregate", err)
	}
	var out []string
	for _, e := range agg.Errors() {
		var fe *field.Error
		if errors.As(e, &fe) {
			out = append(out, fe.Field)
		} else {
			out = append(out, "")
		}
	}
	return out
}

// TestDecodeEveryProblem: values of the wrong type anywhere (document or
// section) are each reported under their full path, validation of what
// could be decoded goes on, and nothing is said about what a value of the
// wrong type left empty.
func TestDecodeEveryProblem(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want []string
	}{
		{"two type errors in one section, and a bad CIDR", header + `backends:
- name: metal
  type: baremetal
  baremetal:
    inventory:
    - name: [bm-1]
      zone: 7
    addressPools:
    - name: public
      addresses: ["192.0.2.0/33"]
      autoAssign: sometimes
`, []string{
			"backends[0].baremetal.addressPools[0].autoAssign",
			"backends[0].baremetal.inventory[0].name",
			"backends[0].baremetal.inventory[0].zone",
			"backends[0].baremetal.addressPools[0].addresses[0]",
		}},
		{"an element of the wrong type keeps the others' indexes", header + `backends:
- name: metal
  type: baremetal
  baremetal:
    addressPools:
    - name: public
      addresses: [{a: b}, "192.0.2.0/33"]
`, []string{
			"backends[0].baremetal.addressPools[0].addresses[0]",
			"backends[0].baremetal.addressPools[0].addresses[1]",
		}},
		{"a wrong top-level type and an unknown key beside it", "apiVersion: multicloud-ccm.io/v1alpha1\nkind: CloudConfig\nclusterID: {a: b}\nclusterIDs: x\nbackends:" + metal,
			[]string{"clusterID", "clusterIDs"}},
		{"a repeated key, and a problem after it", header + "clusterID: Demo_1\nbackends:" + metal,
			[]string{"", "clusterID"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse([]byte(tc.doc), t.TempDir())
			if err == nil {
				t.Fatal("Parse accepted it")
			}
			if got := paths(t, err); !slices.Equal(got, tc.want) {
				t.Errorf("paths = %q, want %q\n%v", got, tc.want, err)
			}
		})
	}
}

// TestLoadNamesTheFile: a file that is not YAML is reported under its own
// name.
func TestLoadNamesTheFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "cloud.yaml")
	if err := os.WriteFile(p, []byte("clusterID: [demo\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := config.Load(p)
	if err == nil || !strings.HasPrefix(err.Error(), p+": not valid YAML: line 1") || strings.Contains(err.Error(), "<file>") {
		t.Errorf("err = %v", err)
	}
}

// TestTypeErrorsNeverRepeatTheValue: a secret written where a reference
// belongs, or a value of the wrong type, is not echoed back.
func TestTypeErrorsNeverRepeatTheValue(t *testing.T) {
	var c struct {
		Password config.SecretRef `json:"password"`
		Port     int              `json:"port"`
		Names    []string         `json:"names"`
	}
	errs := config.DecodeSection([]byte(`{"password": "hunter2", "port": "s3cret", "names": "t0p"}`), field.NewPath("s"), &c)
	msg := errs.ToAggregate().Error()
	if len(errs) != 3 || strings.Contains(msg, "hunter2") || strings.Contains(msg, "s3cret") || strings.Contains(msg, "t0p") {
		t.Errorf("errs = %v", msg)
	}
	for _, want := range []string{"s.password: Invalid value: must be a secret reference, not a string", "s.port: Invalid value: must be a whole number, not a string", "s.names: Invalid value: must be a list, not a string"} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q does not say %q", msg, want)
		}
	}
}
