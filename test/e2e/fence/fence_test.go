// Package fence checks, through the built multicloud-ccm binary with two
// replicas under leader election on a real kube-apiserver, that a leader
// paused past its lease (SIGSTOP) and resumed after the other replica took
// the lease writes nothing to Services or Nodes before it exits: the
// leader-election fence (pkg/fence, issue #41, chaos seed 1019).
package fence

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/framework"
)

const cloudConfig = `apiVersion: multicloud-ccm.io/v1alpha1
kind: CloudConfig
clusterID: e2e
loadBalancer: {defaultBackend: metal}
backends:
- name: metal
  type: baremetal
  baremetal:
    inventory:
    - {name: worker-0, addresses: [{type: InternalIP, address: 10.0.0.10}]}
    - {name: late-fenced, addresses: [{type: InternalIP, address: 10.0.0.11}]}
    - {name: late-unfenced, addresses: [{type: InternalIP, address: 10.0.0.12}]}
    addressPools: [{name: lan, addresses: ["10.210.0.0/24"]}]
`

// Leader-election timings: short, so that the standby takes over within
// seconds of the leader's pause.
const (
	leaseDuration = 4 * time.Second
	renewDeadline = 3 * time.Second
	retryPeriod   = time.Second
)

func leaderFlags(lease string) []string {
	return []string{"--leader-elect=true", "--leader-elect-lease-duration=" + leaseDuration.String(),
		"--leader-elect-renew-deadline=" + renewDeadline.String(), "--leader-elect-retry-period=" + retryPeriod.String(),
		"--leader-elect-resource-name=" + lease}
}

// TestResumedLeaderWritesNothing: replica A leads; it is stopped with
// SIGSTOP; while it is stopped a Service and an uninitialised Node appear,
// and replica B takes the lease. B runs neither the load-balancer nor the
// cloud-node controller, so the new objects are left to A's stale view:
// resumed (SIGCONT), A believes it leads until its elector notices (up to
// the renew deadline) and wants to write them. Every request of A goes
// through a recording proxy: with the fence, none of its writes to
// Services or Nodes reaches kube-apiserver after the pause, it logs the
// refusals, and it exits; with --leader-elect-fence=false (the defect of
// issue #41) the same scenario writes, which shows the check can fail.
func TestResumedLeaderWritesNothing(t *testing.T) {
	cp := framework.StartControlPlaneT(t)
	ctx := context.Background()
	if _, err := framework.CreateNode(ctx, cp.Client, framework.NewNode("worker-0",
		framework.WithProviderID("baremetal://worker-0"), framework.WithoutUninitializedTaint(),
		framework.WithReady(corev1.ConditionTrue),
		framework.WithAddresses(corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.0.10"}))); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		fenced bool
	}{{"fenced", true}, {"unfenced", false}} {
		t.Run(tc.name, func(t *testing.T) {
			writes, refusals := pauseAndResume(t, cp, tc.name, tc.fenced)
			if tc.fenced {
				if len(writes) > 0 {
					t.Errorf("the resumed leader wrote after its pause:\n%s", strings.Join(writes, "\n"))
				}
				if refusals == 0 {
					t.Error("the resumed leader logged no refused write: the scenario gave it nothing to write, the check proves nothing")
				}
				t.Logf("the resumed leader logged %d refusal lines (one per 10 s at most) and exited", refusals)
				return
			}
			if len(writes) == 0 {
				t.Error("without the fence the resumed leader wrote nothing: the scenario does not reproduce issue #41")
			}
			t.Logf("without the fence the resumed leader wrote:\n%s", strings.Join(writes, "\n"))
		})
	}
}

// pauseAndResume runs the scenario on lease "mccm-<name>" with a Service
// and a Node named after name, and returns the writes to Services and
// Nodes the resumed leader made after its pause, and how many refusals it
// logged.
func pauseAndResume(t *testing.T, cp *framework.ControlPlane, name string, fenced bool) ([]string, int) {
	t.Helper()
	ctx := context.Background()
	lease := "mccm-" + name
	proxy := startProxy(t, cp)
	args := append(leaderFlags(lease), "--leader-elect-fence="+fmt.Sprint(fenced))
	a := startCCM(t, cp, framework.CCMOptions{Name: "a-" + name, CloudConfig: cloudConfig, Kubeconfig: proxy.kubeconfig(t, cp), ExtraArgs: args})
	framework.Eventually(t, time.Minute, "replica A leads", logContains(a, "Successfully acquired lease"))
	b := startCCM(t, cp, framework.CCMOptions{Name: "b-" + name, CloudConfig: cloudConfig,
		ExtraArgs: append(slices.Clone(args), "--controllers=*,-multicloud-load-balancer,-cloud-node-controller")})
	holderA, err := framework.LeaseHolder(ctx, cp.Client, "kube-system", lease)
	if err != nil || holderA == "" {
		t.Fatalf("lease holder %q: %v", holderA, err)
	}

	if err := syscall.Kill(a.PID(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			_ = syscall.Kill(a.PID(), syscall.SIGCONT)
		}
	}
	t.Cleanup(resume)
	if _, err := framework.CreateService(ctx, cp.Client, framework.NewLoadBalancerService("default", "during-"+name, framework.WithPort("http", 80, corev1.ProtocolTCP))); err != nil {
		t.Fatal(err)
	}
	if _, err := framework.CreateNode(ctx, cp.Client, framework.NewNode("late-"+name, framework.WithProviderID("baremetal://late-"+name),
		framework.WithReady(corev1.ConditionTrue))); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 4*leaseDuration, "replica B takes the lease", func(ctx context.Context) (bool, string, error) {
		h, err := framework.LeaseHolder(ctx, cp.Client, "kube-system", lease)
		if err != nil {
			return false, err.Error(), nil
		}
		return h != "" && h != holderA, "holder " + h, nil
	})
	t.Logf("B took the lease %s after A's pause", time.Since(paused).Round(time.Millisecond))
	resume()
	select {
	case <-a.Done():
	case <-time.After(renewDeadline + 4*retryPeriod + 10*time.Second):
		t.Errorf("the resumed leader still runs %s after it was resumed", renewDeadline+4*retryPeriod+10*time.Second)
	}
	if exited, _ := b.Exited(); exited {
		t.Errorf("replica B exited:\n%s", b.LogTail(20))
	}
	var writes []string
	for _, r := range proxy.since(paused) {
		if r.status < 300 && (strings.Contains(r.path, "/services/") || strings.Contains(r.path, "/nodes/")) {
			writes = append(writes, fmt.Sprintf("%s %s -> %d", r.method, r.path, r.status))
		}
	}
	log, _ := os.ReadFile(a.LogPath())
	return writes, strings.Count(string(log), "Refused a write")
}

// startCCM starts a replica and stops it when the test ends, printing its
// log's tail if the test failed; the resumed leader exits on its own (it
// lost its lease), so how it ended is not an error.
func startCCM(t *testing.T, cp *framework.ControlPlane, opts framework.CCMOptions) *framework.CCM {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c, err := cp.StartCCM(ctx, opts)
	if c != nil && c.Process != nil {
		t.Cleanup(func() {
			_ = c.Stop(15 * time.Second)
			if t.Failed() {
				t.Log(c.Logs(framework.LogLines))
			}
		})
	}
	if err != nil {
		t.Fatalf("start %s: %v", opts.Name, err)
	}
	return c
}

func logContains(c *framework.CCM, s string) framework.Condition {
	return func(context.Context) (bool, string, error) {
		data, err := os.ReadFile(c.LogPath())
		return err == nil && strings.Contains(string(data), s), "not logged yet", nil
	}
}

// request is a mutating request the proxy passed on, and kube-apiserver's
// answer.
type request struct {
	at           time.Time
	method, path string
	status       int
}

// proxy stands between one replica and kube-apiserver (terminating TLS
// with kube-apiserver's own certificate, which the kubeconfig trusts) and
// records every mutating request with its answer.
type proxy struct {
	url string
	mu  sync.Mutex
	log []request
}

func startProxy(t *testing.T, cp *framework.ControlPlane) *proxy {
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
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatalf("no certificate in %s", cp.CAFile)
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(cp.Dir, "apiserver.crt"), filepath.Join(cp.Dir, "apiserver.key"))
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, ForceAttemptHTTP2: true}
	rp.FlushInterval = -1 // watch events as they come
	rp.ErrorLog = log.New(io.Discard, "", 0)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.url = "https://" + ln.Addr().String()
	srv := &http.Server{Handler: p.recording(rp), ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.New(io.Discard, "", 0),
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}
	go func() {
		if err := srv.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Logf("proxy: %v", err)
		}
	}()
	t.Cleanup(func() { _ = srv.Close() })
	return p
}

// recording passes requests to next and records the mutating ones with
// the time they arrived (the replica sent them) and the answer.
func (p *proxy) recording(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			next.ServeHTTP(w, r)
			return
		}
		at := time.Now()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r)
		p.mu.Lock()
		p.log = append(p.log, request{at: at, method: r.Method, path: r.URL.Path, status: rec.status})
		p.mu.Unlock()
	})
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// kubeconfig writes a copy of cp's admin kubeconfig that reaches
// kube-apiserver through p.
func (p *proxy) kubeconfig(t *testing.T, cp *framework.ControlPlane) string {
	t.Helper()
	data, err := os.ReadFile(cp.AdminKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), cp.URL) {
		t.Fatalf("%s does not name %s", cp.AdminKubeconfig, cp.URL)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(string(data), cp.URL, p.url)), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// since returns the requests that arrived after at.
func (p *proxy) since(at time.Time) []request {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []request
	for _, r := range p.log {
		if r.at.After(at) {
			out = append(out, r)
		}
	}
	return out
}
