package fence

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/framework"
)

// TestProbeHealthyLeaderWrites: a single healthy replica with the fence on
// (the default) does its writes and refuses none, under flag variants that
// meet the fence: JSON instead of protobuf, a non-default lease namespace
// and name, leader migration (the migrated cloud-node-lifecycle-controller
// deletes a node its backend does not know: a write of a controller run
// under the migration lease, fenced on the main one), and kube-apiserver
// behind a path prefix. Checked: the LoadBalancer Service gets an address
// (our load-balancer controller), the uninitialised Node loses its taint
// (upstream's cloud-node-controller), and the log holds no "Refused a
// write".
func TestProbeHealthyLeaderWrites(t *testing.T) {
	cp := framework.StartControlPlaneT(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		args      []string
		prefix    bool
		migration bool
	}{
		{name: "json", args: []string{"--kube-api-content-type=application/json", "--leader-elect-resource-namespace=default", "--leader-elect-resource-name=probe-json"}},
		{name: "migration", args: []string{"--enable-leader-migration", "--node-monitor-period=2s"}, migration: true},
		{name: "prefix", prefix: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append(leaderFlags("probe-"+tc.name), "--leader-elect-fence=true")
			args = append(args, tc.args...)
			opts := framework.CCMOptions{Name: "probe-" + tc.name, CloudConfig: cloudConfig, ExtraArgs: args}
			if tc.prefix {
				opts.Kubeconfig = prefixProxy(t, cp, "/k8s/api-front")
			}
			node := "late-unfenced" // in the backend's inventory
			if _, err := framework.CreateNode(ctx, cp.Client, framework.NewNode(node, framework.WithProviderID("baremetal://"+node),
				framework.WithReady(corev1.ConditionTrue))); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cp.Client.CoreV1().Nodes().Delete(ctx, node, metav1.DeleteOptions{}) })
			gone := "gone-" + tc.name
			if tc.migration {
				if _, err := framework.CreateNode(ctx, cp.Client, framework.NewNode(gone, framework.WithProviderID("baremetal://"+gone),
					framework.WithoutUninitializedTaint(), framework.WithReady(corev1.ConditionFalse))); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = cp.Client.CoreV1().Nodes().Delete(ctx, gone, metav1.DeleteOptions{}) })
			}
			svc := "probe-" + tc.name
			if _, err := framework.CreateService(ctx, cp.Client, framework.NewLoadBalancerService("default", svc, framework.WithPort("http", 80, corev1.ProtocolTCP))); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cp.Client.CoreV1().Services("default").Delete(ctx, svc, metav1.DeleteOptions{}) })
			c := startCCM(t, cp, opts)
			framework.Eventually(t, 2*time.Minute, "the leader acquires the lease", logContains(c, "Successfully acquired lease"))
			framework.Eventually(t, 2*time.Minute, "the Service gets an address", func(ctx context.Context) (bool, string, error) {
				s, err := cp.Client.CoreV1().Services("default").Get(ctx, svc, metav1.GetOptions{})
				if err != nil {
					return false, err.Error(), nil
				}
				return len(s.Status.LoadBalancer.Ingress) > 0, "no ingress", nil
			})
			framework.Eventually(t, 2*time.Minute, "the Node is initialised", func(ctx context.Context) (bool, string, error) {
				n, err := cp.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
				if err != nil {
					return false, err.Error(), nil
				}
				for _, taint := range n.Spec.Taints {
					if taint.Key == framework.UninitializedTaint {
						return false, "still tainted", nil
					}
				}
				return true, "", nil
			})
			if tc.migration {
				framework.Eventually(t, 2*time.Minute, "the migrated lifecycle controller deletes the unknown node", func(ctx context.Context) (bool, string, error) {
					_, err := cp.Client.CoreV1().Nodes().Get(ctx, gone, metav1.GetOptions{})
					return apierrors.IsNotFound(err), "node " + gone + " still there", nil
				})
			}
			data, _ := os.ReadFile(c.LogPath())
			if n := strings.Count(string(data), "Refused a write"); n > 0 {
				t.Errorf("the healthy leader logged %d refusals", n)
			}
		})
	}
}

// prefixProxy serves kube-apiserver under prefix (as a front proxy does)
// and returns a kubeconfig whose server URL carries the prefix.
func prefixProxy(t *testing.T, cp *framework.ControlPlane, prefix string) string {
	t.Helper()
	target, err := url.Parse(cp.URL)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(cp.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	cert, err := tls.LoadX509KeyPair(filepath.Join(cp.Dir, "apiserver.crt"), filepath.Join(cp.Dir, "apiserver.key"))
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, ForceAttemptHTTP2: true}
	rp.FlushInterval = -1
	rp.ErrorLog = log.New(io.Discard, "", 0)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.StripPrefix(prefix, rp), ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.New(io.Discard, "", 0),
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}
	go func() {
		if err := srv.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Logf("prefix proxy: %v", err)
		}
	}()
	t.Cleanup(func() { _ = srv.Close() })
	data, err := os.ReadFile(cp.AdminKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(string(data), cp.URL, "https://"+ln.Addr().String()+prefix)), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
