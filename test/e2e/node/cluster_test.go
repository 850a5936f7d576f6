package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/framework"
)

// nodeBinaries are the programs of a real node beyond the control plane:
// hack/kubelet/build.sh builds the first three and hack/kubelet/pause-image.sh
// the pause image; containerd, ctr and runc are Debian's
// (hack/image/install.sh).
type nodeBinaries struct {
	kubelet, scheduler, controllerManager string
	helm                                  string
	image, pauseImage                     string
}

// requireNode returns the node's binaries and images, or ends the test
// (a failure with CI set) when one is missing or the test is not root.
func requireNode(t *testing.T) nodeBinaries {
	t.Helper()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b := nodeBinaries{
		kubelet:           filepath.Join(root, "_output", "bin", "kubelet"),
		scheduler:         filepath.Join(root, "_output", "bin", "kube-scheduler"),
		controllerManager: filepath.Join(root, "_output", "bin", "kube-controller-manager"),
		helm:              filepath.Join(root, "_output", "tools", "bin", "helm"),
		image:             filepath.Join(root, "_output", "image", "multicloud-ccm.tar"),
		pauseImage:        filepath.Join(root, "_output", "image", "pause.tar"),
	}
	if os.Geteuid() != 0 {
		testutil.Unavailable(t, "a real node needs root (containerd, runc, the kubelet)")
	}
	var missing []string
	for _, p := range []string{b.kubelet, b.scheduler, b.controllerManager, b.helm, b.image, b.pauseImage} {
		if _, err := os.Stat(p); err != nil {
			missing = append(missing, p)
		}
	}
	for _, bin := range []string{"containerd", "ctr", "runc"} {
		if _, err := exec.LookPath(bin); err != nil {
			missing = append(missing, bin)
		}
	}
	if len(missing) > 0 {
		testutil.Unavailable(t, "the real node needs "+strings.Join(missing, ", ")+" (make image kubelet; bash hack/image/install.sh)")
	}
	return b
}

// start runs a process for the rest of the test, stopping it (and printing
// its log's tail when the test failed) at the end.
func start(t *testing.T, name, path string, dir string, args ...string) *framework.Process {
	t.Helper()
	p, err := framework.StartProcess(framework.ProcessOptions{Name: name, Path: path, Args: args, LogPath: filepath.Join(dir, name+".log")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Stop(30 * time.Second); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if t.Failed() {
			t.Logf("----- %s log (%s) -----\n%s", name, p.LogPath(), p.LogTail(framework.LogLines))
		}
	})
	return p
}

func freePort(t *testing.T) string {
	t.Helper()
	p, err := framework.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return strconv.Itoa(p)
}

// startControllers runs kube-controller-manager (Deployments, ReplicaSets,
// the kube-root-ca.crt ConfigMap a pod's in-cluster config reads) and
// kube-scheduler against the control plane, as the admin.
func startControllers(t *testing.T, b nodeBinaries, cp *framework.ControlPlane) {
	t.Helper()
	kc := cp.AdminKubeconfig
	start(t, "kube-controller-manager", b.controllerManager, cp.Dir,
		"--kubeconfig="+kc, "--authentication-kubeconfig="+kc, "--authorization-kubeconfig="+kc,
		"--controllers=deployment,replicaset,root-ca-cert-publisher,serviceaccount,garbagecollector,podgc",
		"--root-ca-file="+cp.CAFile, "--leader-elect=false", "--use-service-account-credentials=false",
		"--bind-address=127.0.0.1", "--secure-port="+freePort(t), "--v=2")
	start(t, "kube-scheduler", b.scheduler, cp.Dir,
		"--kubeconfig="+kc, "--authentication-kubeconfig="+kc, "--authorization-kubeconfig="+kc,
		"--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port="+freePort(t), "--v=2")
}

// containerdConfig is containerd 1.6's configuration for the node: its own
// state folders and socket, runc with cgroupfs, the locally built pause
// image, oom_score_adj clamped, and a loopback-only CNI network (pods here use the host's network;
// the file only lets the runtime report its network ready).
const containerdConfig = `version = 2
root = "%[1]s/root"
state = "%[1]s/state"
[grpc]
  address = "%[1]s/containerd.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.10"
  # The kubelet asks for oom_score_adj -998 (pod sandboxes) and lower for
  # critical pods; lowering it needs CAP_SYS_RESOURCE, which the test
  # machines do not have (runc's init then fails with "can't get final
  # child's PID from pipe"). Clamp it at containerd's own, as rootless
  # setups do.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "%[1]s/cni"
`

// startContainerd runs containerd with its own state under dir, imports
// the images and returns its socket.
func startContainerd(t *testing.T, b nodeBinaries, dir string) string {
	t.Helper()
	dir = filepath.Join(dir, "containerd")
	if err := os.MkdirAll(filepath.Join(dir, "cni"), 0o700); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "config.toml"), fmt.Sprintf(containerdConfig, dir))
	write(t, filepath.Join(dir, "cni", "10-loopback.conflist"), `{"cniVersion":"0.4.0","name":"host","plugins":[{"type":"loopback"}]}`)
	sock := filepath.Join(dir, "containerd.sock")
	// Last, once containerd and the kubelet have stopped: the mounts they
	// leave (pod volumes, sandbox /dev/shm, the kubelet's root) under the
	// run's folder, so that it can be removed.
	t.Cleanup(func() { unmountUnder(t, filepath.Dir(dir)) })
	ctrd := start(t, "containerd", "containerd", dir, "--config", filepath.Join(dir, "config.toml"))
	framework.Eventually(t, 30*time.Second, "containerd's socket", func(context.Context) (bool, string, error) {
		if exited, err := ctrd.Exited(); exited {
			return false, "", fmt.Errorf("containerd exited: %w", err)
		}
		c, err := net.Dial("unix", sock)
		if err != nil {
			return false, err.Error(), nil
		}
		_ = c.Close()
		return true, "", nil
	})
	// Stop every pod container containerd still runs when the test ends
	// (the kubelet is stopped first and leaves them).
	t.Cleanup(func() { removeContainers(t, sock) })
	for _, img := range []string{b.pauseImage, b.image} {
		ctr(t, sock, "images", "import", "--all-platforms", img)
	}
	return sock
}

func ctr(t *testing.T, sock string, args ...string) string {
	t.Helper()
	out, err := exec.Command("ctr", append([]string{"--address", sock, "--namespace", "k8s.io"}, args...)...).CombinedOutput() //nolint:gosec // Test tool.
	if err != nil {
		t.Fatalf("ctr %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// removeContainers kills and deletes every task and container in
// containerd's k8s.io namespace.
func removeContainers(t *testing.T, sock string) {
	out, err := exec.Command("ctr", "--address", sock, "--namespace", "k8s.io", "containers", "list", "--quiet").Output() //nolint:gosec // Test tool.
	if err != nil {
		t.Logf("ctr containers list: %v", err)
		return
	}
	for _, id := range strings.Fields(string(out)) {
		_ = exec.Command("ctr", "--address", sock, "--namespace", "k8s.io", "tasks", "kill", "--signal", "SIGKILL", id).Run() //nolint:gosec // Test tool.
		time.Sleep(200 * time.Millisecond)
		_ = exec.Command("ctr", "--address", sock, "--namespace", "k8s.io", "tasks", "delete", "--force", id).Run() //nolint:gosec // Test tool.
		_ = exec.Command("ctr", "--address", sock, "--namespace", "k8s.io", "containers", "delete", id).Run()       //nolint:gosec // Test tool.
	}
}

// unmountUnder unmounts every mount point under dir, deepest first.
func unmountUnder(t *testing.T, dir string) {
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		t.Errorf("unmount: %v", err)
		return
	}
	var points []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(f[1], dir+"/") {
			points = append(points, f[1])
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(points)))
	for _, p := range points {
		if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
			t.Errorf("unmount %s: %v", p, err)
		}
	}
}

// kubeletConfig: cgroupfs on this cgroup v1 (hybrid) host, which kubelet
// 1.37 refuses unless failCgroupV1 is false; no swap check; no QoS cgroup
// hierarchy or eviction (the test host is shared); the API only on
// loopback.
func kubeletConfig(dir, sock string, port int) map[string]any {
	return map[string]any{
		"apiVersion":                  "kubelet.config.k8s.io/v1beta1",
		"kind":                        "KubeletConfiguration",
		"cgroupDriver":                "cgroupfs",
		"failCgroupV1":                false,
		"failSwapOn":                  false,
		"cgroupsPerQOS":               false,
		"enforceNodeAllocatable":      []string{},
		"containerRuntimeEndpoint":    "unix://" + sock,
		"address":                     "127.0.0.1",
		"port":                        port,
		"readOnlyPort":                0,
		"healthzPort":                 0,
		"podLogsDir":                  filepath.Join(dir, "pod-logs"),
		"authentication":              map[string]any{"anonymous": map[string]any{"enabled": false}, "webhook": map[string]any{"enabled": false}},
		"authorization":               map[string]any{"mode": "AlwaysAllow"},
		"evictionHard":                map[string]string{"memory.available": "1Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
		"imageGCHighThresholdPercent": 100,
		"imageGCLowThresholdPercent":  99,
		"nodeStatusUpdateFrequency":   "5s",
		"syncFrequency":               "5s",
		"fileCheckFrequency":          "5s",
		"serializeImagePulls":         false,
	}
}

// startKubelet registers node name (as a kubelet with
// --cloud-provider=external does: tainted uninitialised) and runs its
// pods with containerd.
func startKubelet(t *testing.T, b nodeBinaries, cp *framework.ControlPlane, sock, name string) {
	t.Helper()
	dir := filepath.Join(cp.Dir, "kubelet")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	port, err := framework.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := json.Marshal(kubeletConfig(dir, sock, port))
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "config.json"), string(cfg))
	start(t, "kubelet", b.kubelet, cp.Dir,
		"--config="+filepath.Join(dir, "config.json"), "--kubeconfig="+cp.AdminKubeconfig,
		"--root-dir="+filepath.Join(dir, "root"), "--cert-dir="+filepath.Join(dir, "pki"),
		"--hostname-override="+name, "--node-ip=127.0.0.1", "--cloud-provider=external", "--v=2")
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
