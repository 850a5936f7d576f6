package image

import (
	"bytes"
	"context"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/framework"
)

const bareMetalConfig = `apiVersion: multicloud-ccm.io/v1alpha1
kind: CloudConfig
clusterID: image-e2e
loadBalancer:
  defaultBackend: metal
backends:
- name: metal
  type: baremetal
  baremetal:
    inventory:
    - name: bm-1
      addresses: [{type: InternalIP, address: 10.0.0.11}]
    addressPools:
    - name: public
      addresses: ["192.0.2.0/28"]
`

// self is this test binary, which the framework runs as the "CCM binary":
// with the wrapper environment it runs the image under runc.
func self(tb testing.TB) string {
	tb.Helper()
	exe, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	return exe
}

// TestVersion runs the image's entrypoint with --version: it names the
// product and the version the image was built with.
func TestVersion(t *testing.T) {
	u := unpack(t)
	cmd := exec.Command(self(t), "--version") //nolint:gosec // This test binary.
	cmd.Env = append(os.Environ(), envWrapper+"="+u.Dir, envRuncRoot+"="+u.RuncRoot)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("--version in the image: %v\n%s", err, out)
	}
	if want := "multicloud-ccm " + u.Version + " ("; !strings.HasPrefix(string(out), want) {
		t.Errorf("--version printed %q, want it to start with %q", out, want)
	}
}

// TestRunsInImage starts the image's binary under runc against the test
// API server, as the image's user on a read-only root, and watches it
// initialise a Node and give a LoadBalancer Service an address.
func TestRunsInImage(t *testing.T) {
	u := unpack(t)
	cp := suite.ControlPlane(t)
	u.wrapperEnv(t)
	cp.Binaries.CCM = self(t)
	// No --cert-dir: the serving certificate stays in memory, as in the chart.
	cp.StartCCMT(t, framework.CCMOptions{CloudConfig: bareMetalConfig, ExtraArgs: []string{"--cert-dir="}})

	pid := containerPID(t, u.RuncRoot)
	if uid := procUID(t, pid); uid != "65532" {
		t.Errorf("the container's process runs as uid %s, want 65532 (the image's user)", uid)
	}
	if opts := rootMountOptions(t, pid); !strings.HasPrefix(opts, "ro,") && opts != "ro" {
		t.Errorf("the container's root is mounted %q, want read-only", opts)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := framework.CreateNode(ctx, cp.Client, framework.NewNode("bm-1")); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, "bm-1 initialised by the CCM in the image", framework.NodeMatches(cp.Client, "bm-1",
		func(n *corev1.Node) (bool, string) {
			return n.Spec.ProviderID == "baremetal://bm-1" && !framework.HasTaint(n, framework.UninitializedTaint),
				"providerID " + strconv.Quote(n.Spec.ProviderID)
		}))
	if _, err := framework.CreateService(ctx, cp.Client, framework.NewLoadBalancerService("default", "web")); err != nil {
		t.Fatal(err)
	}
	pool := netip.MustParsePrefix("192.0.2.0/28")
	framework.Eventually(t, time.Minute, "web gets an address of the pool", framework.ServiceMatches(cp.Client, "default", "web",
		func(s *corev1.Service) (bool, string) {
			ips := framework.IngressIPs(s)
			if len(ips) != 1 {
				return false, "ingress " + strings.Join(ips, ",")
			}
			a, err := netip.ParseAddr(ips[0])
			return err == nil && pool.Contains(a), "ingress " + ips[0]
		}))
}

// procUID is the real uid of process pid.
func procUID(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status")) //nolint:gosec // procfs.
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "Uid:" {
			return f[1]
		}
	}
	t.Fatalf("no Uid line in /proc/%d/status", pid)
	return ""
}

// rootMountOptions is the per-mount options of "/" as process pid sees it.
func rootMountOptions(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "mountinfo")) //nolint:gosec // procfs.
	if err != nil {
		t.Fatal(err)
	}
	opts := ""
	for _, line := range strings.Split(string(b), "\n") {
		// id parent major:minor root mountpoint options ...; the last "/" wins.
		if f := strings.Fields(line); len(f) > 5 && f[4] == "/" {
			opts = f[5]
		}
	}
	if opts == "" {
		t.Fatalf("no / in /proc/%d/mountinfo", pid)
	}
	return opts
}

// TestReproducible builds the image twice from the same binary and VERSION
// and compares the digests and the docker-archive tarballs byte for byte.
func TestReproducible(t *testing.T) {
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bins := framework.RequireBinaries(t, func(b framework.Binaries) []string { return []string{b.CCM} })
	var digests, tarballs [2][]byte
	for i := range 2 {
		out := t.TempDir()
		cmd := exec.Command("bash", filepath.Join(root, "hack", "image", "build.sh")) //nolint:gosec // The repository's script.
		cmd.Env = append(os.Environ(), "VERSION=v0.0.0-reproducible", "BIN="+bins.CCM, "IMAGE_OUT="+out)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("build %d: %v\n%s", i+1, err, b)
		}
		if digests[i], err = os.ReadFile(filepath.Join(out, "digest")); err != nil { //nolint:gosec // Test output.
			t.Fatal(err)
		}
		if tarballs[i], err = os.ReadFile(filepath.Join(out, "multicloud-ccm.tar")); err != nil { //nolint:gosec // Test output.
			t.Fatal(err)
		}
	}
	if !bytes.Equal(digests[0], digests[1]) {
		t.Errorf("two builds from the same inputs: digests %s and %s", digests[0], digests[1])
	}
	if !bytes.Equal(tarballs[0], tarballs[1]) {
		t.Errorf("two builds from the same inputs wrote different tarballs (%d and %d bytes)", len(tarballs[0]), len(tarballs[1]))
	}
}
