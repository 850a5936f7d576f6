package framework

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

func TestMergeFlags(t *testing.T) {
	tests := []struct {
		name            string
		defaults, extra []string
		want            []string
	}{
		{"no extra", []string{"--a=1", "--b"}, nil, []string{"--a=1", "--b"}},
		{"override value", []string{"--a=1", "--b=2"}, []string{"--a=3"}, []string{"--b=2", "--a=3"}},
		{"override bare flag", []string{"--x", "--y=1"}, []string{"--x=false"}, []string{"--y=1", "--x=false"}},
		{"new flag", []string{"--a=1"}, []string{"--c=1"}, []string{"--a=1", "--c=1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := mergeFlags(tt.defaults, tt.extra); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("mergeFlags = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestWaitFor(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name    string
		cond    func(ctx context.Context, calls int) (bool, string, error)
		wantErr string
		minCall int
	}{
		{"holds at once", func(context.Context, int) (bool, string, error) { return true, "", nil }, "", 1},
		{"holds on the third poll", func(_ context.Context, n int) (bool, string, error) { return n >= 3, "n", nil }, "", 3},
		{"error ends the wait", func(context.Context, int) (bool, string, error) { return false, "", boom }, "boom", 1},
		{"timeout names what was seen", func(context.Context, int) (bool, string, error) { return false, "still red", nil }, "last seen: still red", 2},
		{"a poll cut off by the deadline keeps what was seen before", func(ctx context.Context, n int) (bool, string, error) {
			if n == 1 {
				return false, "still red", nil
			}
			<-ctx.Done()
			return false, ctx.Err().Error(), nil
		}, "last seen: still red", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			err := WaitFor(context.Background(), 700*time.Millisecond, "the thing", func(ctx context.Context) (bool, string, error) {
				calls++
				return tt.cond(ctx, calls)
			})
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("WaitFor: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("WaitFor error = %v, want it to contain %q", err, tt.wantErr)
			}
			if calls < tt.minCall {
				t.Errorf("condition called %d times, want at least %d", calls, tt.minCall)
			}
		})
	}
}

func TestGeneratePKI(t *testing.T) {
	p, err := generatePKI(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{p.CAFile, p.CAKeyFile, p.ServingCert, p.ServingKey, p.SAKey, p.SAPub} {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", f, fi.Mode().Perm())
		}
	}
}

func TestProcessLogsAndExit(t *testing.T) {
	bins := RequireBinaries(t, Binaries.ControlPlaneOnly)
	dir := t.TempDir()
	p, err := StartProcess(ProcessOptions{Name: "kubectl", Path: bins.Kubectl, Args: []string{"version", "--client"}, LogPath: filepath.Join(dir, "k.log")})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("kubectl version --client did not exit")
	}
	if exited, err := p.Exited(); !exited || err != nil {
		t.Fatalf("Exited() = %v, %v; want true, nil", exited, err)
	}
	if log := p.LogTail(5); !strings.Contains(log, "Client Version: v1.37") {
		t.Errorf("log does not hold kubectl's version:\n%s", log)
	}
	if err := p.Stop(time.Second); err == nil {
		t.Error("Stop on a process that had exited: want an error saying so")
	}
}

func TestControlPlane(t *testing.T) {
	cp := StartControlPlaneT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	t.Run("admin client", func(t *testing.T) {
		Eventually(t, 20*time.Second, "namespace kube-system", func(ctx context.Context) (bool, string, error) {
			_, err := cp.Client.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{})
			return err == nil, errString(err), nil
		})
	})
	t.Run("admin kubeconfig with kubectl", func(t *testing.T) {
		out, err := cp.Kubectl(ctx, "auth", "can-i", "delete", "nodes")
		if err != nil || strings.TrimSpace(out) != "yes" {
			t.Fatalf("kubectl auth can-i delete nodes = %q, %v; want yes", out, err)
		}
	})
	t.Run("node as a kubelet creates it", func(t *testing.T) {
		n, err := CreateNode(ctx, cp.Client, NewNode("fw-node", WithProviderID("baremetal://fw-node"), WithReady(corev1.ConditionFalse)))
		if err != nil {
			t.Fatal(err)
		}
		if !HasTaint(n, UninitializedTaint) || n.Spec.ProviderID != "baremetal://fw-node" || len(n.Status.Conditions) != 1 || n.Status.Conditions[0].Status != corev1.ConditionFalse {
			t.Fatalf("node read back = taints %v providerID %q conditions %v", n.Spec.Taints, n.Spec.ProviderID, n.Status.Conditions)
		}
		if err := SetNodeReady(ctx, cp.Client, "fw-node", corev1.ConditionTrue); err != nil {
			t.Fatal(err)
		}
		Eventually(t, 5*time.Second, "Ready=True", NodeMatches(cp.Client, "fw-node", func(n *corev1.Node) (bool, string) {
			return n.Status.Conditions[0].Status == corev1.ConditionTrue, string(n.Status.Conditions[0].Status)
		}))
	})
	t.Run("service account kubeconfig follows RBAC", func(t *testing.T) {
		testServiceAccountKubeconfig(ctx, t, cp)
	})
}

func testServiceAccountKubeconfig(ctx context.Context, t *testing.T, cp *ControlPlane) {
	path, err := cp.ServiceAccountKubeconfig(ctx, "fw", "reader")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	sa := kubernetes.NewForConfigOrDie(cfg)
	if _, err := sa.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("listing nodes without RBAC: err = %v, want Forbidden", err)
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "fw-node-reader"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"list"}}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "fw-node-reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "fw", Name: "reader"}}}
	if _, err := cp.Client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	Eventually(t, 10*time.Second, "ServiceAccount may list nodes", func(ctx context.Context) (bool, string, error) {
		_, err := sa.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		return err == nil, errString(err), nil
	})
	if out, err := cp.KubectlWith(ctx, path, nil, "auth", "can-i", "delete", "nodes"); strings.TrimSpace(out) != "no" {
		t.Errorf("ServiceAccount can-i delete nodes = %q (%v), want no", out, err)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
