package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
)

// credentials is shaped like a backend section holding secrets.
type credentials struct {
	Username config.SecretRef `json:"username"`
	Password config.SecretRef `json:"password"`
}

// TestSecretNeverInline: a password written into the config is refused with
// its path and the fix, and the error does not repeat the secret.
func TestSecretNeverInline(t *testing.T) {
	var c credentials
	errs := config.DecodeSection([]byte(`{"username": {"env": "USER"}, "password": "hunter2"}`), field.NewPath("backends").Index(0).Child("vsphere"), &c)
	if len(errs) == 0 {
		t.Fatal("an inline password was accepted")
	}
	msg := errs.ToAggregate().Error()
	for _, want := range []string{"backends[0].vsphere.password", "file", "env", "never"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not mention %q", msg, want)
		}
	}
	if strings.Contains(msg, "hunter2") {
		t.Errorf("error repeats the secret: %q", msg)
	}
	// An unknown key in a reference (e.g. value: ...) is refused too.
	errs = config.DecodeSection([]byte(`{"password": {"value": "hunter2"}}`), field.NewPath("s"), &c)
	if len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), "s.password.value") {
		t.Errorf("password.value: errs = %v", errs)
	}
}

func TestSecretRefValidate(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name     string
		ref      config.SecretRef
		required bool
		wantErr  string
		wantFile string
	}{
		{name: "file and env", ref: config.SecretRef{File: "a", Env: "B"}, wantErr: "set only one of file and env"},
		{name: "required, missing", ref: config.SecretRef{}, required: true, wantErr: "Required value"},
		{name: "optional, missing", ref: config.SecretRef{}},
		{name: "relative file resolves against the config folder", ref: config.SecretRef{File: "secrets/pw"}, wantFile: filepath.Join(dir, "secrets/pw")},
		{name: "absolute file kept", ref: config.SecretRef{File: "/run/secrets/pw"}, wantFile: "/run/secrets/pw"},
		{name: "env", ref: config.SecretRef{Env: "PW"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ref := tc.ref
			errs := ref.Validate(field.NewPath("x", "password"), dir, tc.required)
			if tc.wantErr == "" && len(errs) > 0 {
				t.Fatalf("Validate: %v", errs)
			}
			if tc.wantErr != "" {
				if len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), tc.wantErr) || !strings.Contains(errs.ToAggregate().Error(), "x.password") {
					t.Fatalf("Validate = %v, want %q under x.password", errs, tc.wantErr)
				}
			}
			if tc.wantFile != "" && ref.File != tc.wantFile {
				t.Errorf("File = %q, want %q", ref.File, tc.wantFile)
			}
		})
	}
}

func TestSecretRefResolve(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("pw", "  s3cret\n")
	empty := write("empty", " \n")
	t.Setenv("MCCM_TEST_SECRET", "from-env")
	t.Setenv("MCCM_TEST_EMPTY", "")

	tests := []struct {
		name    string
		ref     config.SecretRef
		want    string
		wantErr string
	}{
		{"file, trimmed", config.SecretRef{File: good}, "s3cret", ""},
		{"empty file", config.SecretRef{File: empty}, "", "is empty"},
		{"missing file", config.SecretRef{File: filepath.Join(dir, "nope")}, "", "reading secret file"},
		{"env", config.SecretRef{Env: "MCCM_TEST_SECRET"}, "from-env", ""},
		{"empty env", config.SecretRef{Env: "MCCM_TEST_EMPTY"}, "", "MCCM_TEST_EMPTY is not set or empty"},
		{"unset env", config.SecretRef{Env: "MCCM_TEST_UNSET_VARIABLE"}, "", "MCCM_TEST_UNSET_VARIABLE is not set"},
		{"nothing", config.SecretRef{}, "", "no secret source"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.ref.Resolve()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Resolve = %q, %v; want error %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Resolve = %q, %v; want %q", got, err, tc.want)
			}
			if tc.ref.IsSet() != true {
				t.Error("IsSet = false for a set reference")
			}
		})
	}
}

func TestResolveFile(t *testing.T) {
	tests := []struct{ dir, path, want string }{
		{"/etc/ccm", "ca.pem", "/etc/ccm/ca.pem"},
		{"/etc/ccm", "/abs/ca.pem", "/abs/ca.pem"},
		{"/etc/ccm", "", ""},
		{"", "ca.pem", "ca.pem"},
	}
	for _, tc := range tests {
		if got := config.ResolveFile(tc.dir, tc.path); got != tc.want {
			t.Errorf("ResolveFile(%q, %q) = %q, want %q", tc.dir, tc.path, got, tc.want)
		}
	}
}
