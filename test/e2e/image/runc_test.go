package image

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/framework"
)

// Environment of the wrapper mode (see runWrapper).
const (
	// envWrapper, set to the unpacked bundle's folder, makes the test
	// binary act as the wrapper.
	envWrapper = "IMAGE_E2E_BUNDLE"
	// envRuncRoot is runc's state folder (--root).
	envRuncRoot = "IMAGE_E2E_RUNC_ROOT"
)

// unpacked is the image's OCI layout unpacked once per test binary.
type unpacked struct {
	// Dir holds config.json (umoci's runtime spec from the image config)
	// and rootfs/.
	Dir string
	// Version is the layout's tag, the VERSION the image was built with.
	Version string
	// RuncRoot is runc's state folder for this test binary.
	RuncRoot string
}

var (
	unpackOnce sync.Once
	unpackRes  unpacked
	unpackErr  error
)

// imageLayout returns _output/image/oci and its only tag.
func imageLayout(tb testing.TB) (string, string) {
	tb.Helper()
	root, err := framework.RepoRoot()
	if err != nil {
		tb.Fatal(err)
	}
	dir := filepath.Join(root, "_output", "image", "oci")
	b, err := os.ReadFile(filepath.Join(dir, "index.json")) //nolint:gosec // The built layout.
	if err != nil {
		testutil.Unavailable(tb, fmt.Sprintf("no image layout (run make image): %v", err))
	}
	var index struct {
		Manifests []struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"manifests"`
	}
	if err := json.Unmarshal(b, &index); err != nil || len(index.Manifests) != 1 {
		tb.Fatalf("%s/index.json: want one tagged manifest (%v): %s", dir, err, b)
	}
	tag := index.Manifests[0].Annotations["org.opencontainers.image.ref.name"]
	if tag == "" {
		tb.Fatalf("%s/index.json names no tag: %s", dir, b)
	}
	return dir, tag
}

// requireRunc ends the test unless it runs as root with runc and umoci.
func requireRunc(tb testing.TB) {
	tb.Helper()
	if os.Geteuid() != 0 {
		testutil.Unavailable(tb, "running the image needs root (runc)")
	}
	for _, bin := range []string{"runc", "umoci"} {
		if _, err := exec.LookPath(bin); err != nil {
			testutil.Unavailable(tb, bin+" is not installed (bash hack/image/install.sh)")
		}
	}
}

// unpack unpacks the image once (umoci: the layers, and a runtime spec
// from the image's config) into a folder removed when the tests end.
func unpack(tb testing.TB) unpacked {
	tb.Helper()
	requireRunc(tb)
	layout, tag := imageLayout(tb)
	unpackOnce.Do(func() {
		dir, err := os.MkdirTemp("", "mccm-image-")
		if err != nil {
			unpackErr = err
			return
		}
		suite.OnStop(func() { _ = os.RemoveAll(dir) })
		if err := os.Chmod(dir, 0o755); err != nil { //nolint:gosec // uid 65532 reads the bundles below.
			unpackErr = err
			return
		}
		bundle := filepath.Join(dir, "bundle")
		out, err := exec.Command("umoci", "unpack", "--image", layout+":"+tag, bundle).CombinedOutput() //nolint:gosec // Test tools.
		if err != nil {
			unpackErr = fmt.Errorf("umoci unpack %s:%s: %w\n%s", layout, tag, err, out)
			return
		}
		unpackRes = unpacked{Dir: bundle, Version: tag, RuncRoot: filepath.Join(dir, "runc")}
	})
	if unpackErr != nil {
		tb.Fatal(unpackErr)
	}
	return unpackRes
}

// wrapperEnv makes the CCM processes the framework starts run in the image
// (the framework starts its binary with the test's environment).
func (u unpacked) wrapperEnv(tb testing.TB) {
	tb.Helper()
	tb.Setenv(envWrapper, u.Dir)
	tb.Setenv(envRuncRoot, u.RuncRoot)
}

// runWrapper is the wrapper mode: it writes a bundle running the image's
// entrypoint with args as the image's user, on a read-only root with a
// tmpfs /tmp (as the chart mounts one), in the host's network namespace
// (the test's API server is on loopback), with each file an argument names
// copied in read-only at the same path, then becomes `runc run`.
func runWrapper(args []string) int {
	if err := execRunc(os.Getenv(envWrapper), os.Getenv(envRuncRoot), args); err != nil {
		fmt.Fprintln(os.Stderr, "image wrapper:", err)
		return 1
	}
	return 0
}

func execRunc(unpackedDir, runcRoot string, args []string) error {
	spec, err := readSpec(filepath.Join(unpackedDir, "config.json"))
	if err != nil {
		return err
	}
	id := "mccm-" + strconv.Itoa(os.Getpid())
	bundle := filepath.Join(filepath.Dir(unpackedDir), "run", id)
	if err := os.MkdirAll(filepath.Join(bundle, "files"), 0o755); err != nil { //nolint:gosec // Read by uid 65532.
		return err
	}
	mounts := []any{map[string]any{"destination": "/tmp", "type": "tmpfs", "source": "tmpfs", "options": []string{"nosuid", "nodev", "mode=1777", "size=16m"}}}
	files, err := namedFiles(args)
	if err != nil {
		return err
	}
	for i, path := range files {
		copied := filepath.Join(bundle, "files", strconv.Itoa(i))
		if err := copyReadable(path, copied); err != nil {
			return err
		}
		mounts = append(mounts, map[string]any{"destination": path, "type": "bind", "source": copied, "options": []string{"bind", "ro"}})
	}
	process := spec["process"].(map[string]any)
	process["terminal"] = false
	process["args"] = append(process["args"].([]any), toAny(args)...)
	spec["root"] = map[string]any{"path": filepath.Join(unpackedDir, "rootfs"), "readonly": true}
	spec["mounts"] = append(spec["mounts"].([]any), mounts...)
	linux := spec["linux"].(map[string]any)
	var ns []any
	for _, n := range linux["namespaces"].([]any) {
		if n.(map[string]any)["type"] != "network" {
			ns = append(ns, n)
		}
	}
	linux["namespaces"] = ns
	b, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), b, 0o600); err != nil {
		return err
	}
	runc, err := exec.LookPath("runc")
	if err != nil {
		return err
	}
	// runc run forwards the signals it gets (the framework's SIGTERM) to
	// the container's process and exits with its status.
	return syscall.Exec(runc, []string{"runc", "--root", runcRoot, "run", "--bundle", bundle, id}, os.Environ()) //nolint:gosec // Test tool.
}

// absPath is an absolute path inside a file (a kubeconfig's
// certificate-authority).
var absPath = regexp.MustCompile(`/[^\s"',]+`)

// namedFiles lists the regular files the arguments name (--flag=/path), and
// the ones those files name in turn (a kubeconfig's CA file).
func namedFiles(args []string) ([]string, error) {
	seen := map[string]bool{}
	var files []string
	var add func(path string, depth int) error
	add = func(path string, depth int) error {
		if seen[path] || !filepath.IsAbs(path) {
			return nil
		}
		if fi, err := os.Stat(path); err != nil || !fi.Mode().IsRegular() {
			return nil //nolint:nilerr // Not a file: not mounted.
		}
		seen[path] = true
		files = append(files, path)
		if depth > 0 {
			return nil
		}
		b, err := os.ReadFile(path) //nolint:gosec // Files the framework wrote.
		if err != nil {
			return err
		}
		for _, p := range absPath.FindAllString(string(b), -1) {
			if err := add(p, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	for _, a := range args {
		if _, path, ok := strings.Cut(a, "="); ok {
			if err := add(path, 0); err != nil {
				return nil, err
			}
		}
	}
	return files, nil
}

func readSpec(path string) (map[string]any, error) {
	b, err := os.ReadFile(path) //nolint:gosec // The unpacked bundle.
	if err != nil {
		return nil, err
	}
	var spec map[string]any
	return spec, json.Unmarshal(b, &spec)
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// copyReadable copies src to dst, readable by everyone (the kubeconfig and
// cloud-config the framework writes are root's; the image runs as 65532,
// as a Secret volume with a readable mode would give it).
func copyReadable(src, dst string) error {
	b, err := os.ReadFile(src) //nolint:gosec // Files the framework wrote.
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o444) //nolint:gosec // Read by uid 65532 in the container.
}

// containerPID returns the host PID of the only container's process.
func containerPID(tb testing.TB, runcRoot string) int {
	tb.Helper()
	out, err := exec.Command("runc", "--root", runcRoot, "list", "--format", "json").Output() //nolint:gosec // Test tool.
	if err != nil {
		tb.Fatalf("runc list: %v", err)
	}
	var list []struct {
		ID     string `json:"id"`
		PID    int    `json:"pid"`
		Status string `json:"status"`
	}
	if err := json.Unmarshal(out, &list); err != nil {
		tb.Fatalf("runc list: %v: %s", err, out)
	}
	var running []int
	for _, c := range list {
		if c.Status == "running" {
			running = append(running, c.PID)
		}
	}
	if len(running) != 1 {
		tb.Fatalf("want one running container, runc lists %s", out)
	}
	return running[0]
}
