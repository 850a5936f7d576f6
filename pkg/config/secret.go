package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// SecretRef points at a credential. Credentials are never written into the
// config itself: they come from a file (a mounted Secret) or an environment
// variable. Exactly one of File and Env is set.
type SecretRef struct {
	// File is a path to a file holding the secret; relative paths resolve
	// against the config file's folder. Surrounding white space is trimmed.
	File string `json:"file,omitempty"`
	// Env names an environment variable holding the secret.
	Env string `json:"env,omitempty"`
}

// IsSet reports whether the reference names a source.
func (s SecretRef) IsSet() bool { return s.File != "" || s.Env != "" }

// Validate checks the reference's shape (not whether the secret can be read:
// Resolve does that when the backend starts). dir makes File absolute.
func (s *SecretRef) Validate(p *field.Path, dir string, required bool) field.ErrorList {
	switch {
	case s.File != "" && s.Env != "":
		return field.ErrorList{field.Invalid(p, "file and env", "set only one of file and env")}
	case !s.IsSet() && required:
		return field.ErrorList{field.Required(p, "set file (a path to a mounted Secret) or env (an environment variable name)")}
	case s.File != "" && !filepath.IsAbs(s.File) && dir != "":
		s.File = filepath.Join(dir, s.File)
	}
	return nil
}

// Resolve reads the secret. The error names the source but never the value.
func (s SecretRef) Resolve() (string, error) {
	switch {
	case s.File != "":
		b, err := os.ReadFile(s.File)
		if err != nil {
			return "", fmt.Errorf("reading secret file: %w", err)
		}
		v := strings.TrimSpace(string(b))
		if v == "" {
			return "", fmt.Errorf("secret file %s is empty", s.File)
		}
		return v, nil
	case s.Env != "":
		v, ok := os.LookupEnv(s.Env)
		if !ok || v == "" {
			return "", fmt.Errorf("environment variable %s is not set or empty", s.Env)
		}
		return v, nil
	}
	return "", fmt.Errorf("no secret source set")
}

// ResolveFile makes a path in a section absolute against the config's folder.
func ResolveFile(dir, path string) string {
	if path == "" || filepath.IsAbs(path) || dir == "" {
		return path
	}
	return filepath.Join(dir, path)
}
