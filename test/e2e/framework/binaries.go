package framework

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
)

// Environment variables naming the binaries the framework runs. Each
// defaults to the file of the same name under <repo>/_output/bin, which is
// where `make build` and hack/build-control-plane.sh put them.
const (
	// EnvCCM names the multicloud-ccm binary (default _output/bin/multicloud-ccm).
	EnvCCM = "MULTICLOUD_CCM_BIN"
	// EnvAPIServer names the kube-apiserver binary (default _output/bin/kube-apiserver).
	EnvAPIServer = "KUBE_APISERVER_BIN"
	// EnvEtcd names the etcd binary (default _output/bin/etcd). etcd itself
	// reads every ETCD_* variable, so the framework removes them from the
	// environment it gives etcd.
	EnvEtcd = "ETCD_BIN"
	// EnvKubectl names the kubectl binary (default _output/bin/kubectl).
	EnvKubectl = "KUBECTL_BIN"
	// EnvKeep, when set to any non-empty value, keeps each run's folder
	// (logs, certificates, kubeconfigs) instead of deleting it.
	EnvKeep = "E2E_KEEP"
)

// Binaries holds the absolute paths of the programs the framework runs.
type Binaries struct {
	// CCM is the multicloud-ccm binary.
	CCM string
	// APIServer is the kube-apiserver binary.
	APIServer string
	// Etcd is the etcd binary.
	Etcd string
	// Kubectl is the kubectl binary.
	Kubectl string
}

// FindBinaries resolves every binary from its environment variable or its
// default under _output/bin. It does not check that the files exist; see
// Binaries.Check.
func FindBinaries() (Binaries, error) {
	root, rootErr := RepoRoot()
	resolve := func(env, name string) string {
		p := os.Getenv(env)
		if p == "" {
			if rootErr != nil {
				return ""
			}
			p = filepath.Join(root, "_output", "bin", name)
		}
		if abs, err := filepath.Abs(p); err == nil {
			p = abs
		}
		return p
	}
	b := Binaries{
		CCM:       resolve(EnvCCM, "multicloud-ccm"),
		APIServer: resolve(EnvAPIServer, "kube-apiserver"),
		Etcd:      resolve(EnvEtcd, "etcd"),
		Kubectl:   resolve(EnvKubectl, "kubectl"),
	}
	if rootErr != nil && (b.CCM == "" || b.APIServer == "" || b.Etcd == "" || b.Kubectl == "") {
		return b, fmt.Errorf("the repository root is unknown (%w): set %s, %s, %s and %s", rootErr, EnvCCM, EnvAPIServer, EnvEtcd, EnvKubectl)
	}
	return b, nil
}

// ControlPlaneOnly lists the binaries a control plane needs (no CCM).
func (b Binaries) ControlPlaneOnly() []string { return []string{b.Etcd, b.APIServer, b.Kubectl} }

// All lists every binary.
func (b Binaries) All() []string { return []string{b.Etcd, b.APIServer, b.Kubectl, b.CCM} }

// Check reports every path in paths that is not an executable file,
// together, each with the variable that sets it.
func (b Binaries) Check(paths []string) error {
	envOf := map[string]string{b.CCM: EnvCCM, b.APIServer: EnvAPIServer, b.Etcd: EnvEtcd, b.Kubectl: EnvKubectl}
	var problems []error
	for _, p := range paths {
		if fi, err := os.Stat(p); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			problems = append(problems, fmt.Errorf("no executable at %s (set %s)", p, envOf[p]))
		}
	}
	return errors.Join(problems...)
}

// RequireBinaries returns the binaries after checking the ones which
// selects (Binaries.All when nil), or ends the test when one is missing:
// with CI set in the environment it fails, otherwise it skips with a
// message telling how to build them.
func RequireBinaries(tb testing.TB, which func(Binaries) []string) Binaries {
	tb.Helper()
	b, err := FindBinaries()
	if err == nil {
		if which == nil {
			which = Binaries.All
		}
		err = b.Check(which(b))
	}
	if err != nil {
		MissingBinaries(tb, err)
	}
	return b
}

// MissingBinaries ends tb because of err from FindBinaries: a failure when
// CI is set, a skip otherwise.
func MissingBinaries(tb testing.TB, err error) {
	tb.Helper()
	testutil.Unavailable(tb, MissingBinariesMessage(err))
}

// MissingBinariesMessage explains err from FindBinaries and how to fix it.
func MissingBinariesMessage(err error) string {
	return "e2e binaries missing (run `make e2e`, which builds them, or set the variables):\n  " +
		strings.ReplaceAll(err.Error(), "\n", "\n  ")
}

// InCI reports whether the CI environment variable is set.
func InCI() bool { return os.Getenv("CI") != "" }

// RepoRoot returns the folder holding the module's go.mod, found by walking
// up from the working directory.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("repo root: %w", err)
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod")) //nolint:gosec // Reading go.mod files up the tree is the point.
		if err == nil && strings.Contains(string(data), "module github.com/multicloud-ccm/multicloud-ccm\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("repo root: no go.mod for github.com/multicloud-ccm/multicloud-ccm above the working directory")
		}
		dir = parent
	}
}

// OutputFiles returns the paths of names (relative paths) inside the folder
// named by the environment variable env, or else _output/<dir> of the
// repository, where `make <target>` builds them; it ends tb (a skip, or a
// failure in CI) when any of them is missing.
func OutputFiles(tb testing.TB, env, dir, target string, names ...string) []string {
	tb.Helper()
	base := os.Getenv(env)
	if base == "" {
		root, err := RepoRoot()
		if err != nil {
			tb.Fatal(err)
		}
		base = filepath.Join(root, "_output", dir)
	}
	paths := make([]string, len(names))
	for i, name := range names {
		paths[i] = filepath.Join(base, name)
		if _, err := os.Stat(paths[i]); err != nil {
			MissingBinaries(tb, fmt.Errorf("%s (set %s; build it with `make %s`): %w", paths[i], env, target, err))
		}
	}
	return paths
}
