// Package lbdefaults checks, through the built multicloud-ccm binary with
// its own defaults on a real kube-apiserver, what the default install does
// for classless LoadBalancer Services (docs/routing.md, "Which controller
// serves which Service"): multicloud-ccm's own load-balancer controller
// serves them, upstream's service controller is off, drift is repaired,
// and a restart or a leader failover re-checks unchanged Services without
// writes, events or per-Service log lines.
package lbdefaults

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/framework"
)

const pool = "10.210.0.0/24"

const cloudConfig = `apiVersion: multicloud-ccm.io/v1alpha1
kind: CloudConfig
clusterID: e2e
loadBalancer: {defaultBackend: metal}
backends:
- name: metal
  type: baremetal
  baremetal:
    inventory: [{name: worker-0, addresses: [{type: InternalIP, address: 10.0.0.10}]}]
    addressPools: [{name: lan, addresses: ["` + pool + `"]}]
`

// binaryDefaults undo the framework's flags that differ from the binary's
// own defaults (--v=2, --concurrent-service-syncs=4); no --controllers
// flag is given.
var binaryDefaults = []string{"--v=0", "--concurrent-service-syncs=10"}

// setup starts a control plane with one ready bare-metal node and the CCM
// with the binary's defaults plus extra flags.
func setup(t *testing.T, ns string, extra ...string) (*framework.ControlPlane, *framework.CCM) {
	t.Helper()
	cp := framework.StartControlPlaneT(t)
	ctx := context.Background()
	if _, err := framework.CreateNode(ctx, cp.Client, framework.NewNode("worker-0",
		framework.WithProviderID("baremetal://worker-0"), framework.WithoutUninitializedTaint(),
		framework.WithReady(corev1.ConditionTrue),
		framework.WithAddresses(corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.0.10"}))); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ccm := cp.StartCCMT(t, framework.CCMOptions{CloudConfig: cloudConfig, ExtraArgs: append(slices.Clone(binaryDefaults), extra...)})
	return cp, ccm
}

// TestClasslessDriftRepairedByDefault: with no --controllers flag,
// upstream's service controller does not run, our controller serves a
// classless Service (kubectl wait finds its LoadBalancerReady and
// per-backend conditions), and an address edited by hand in its status is
// restored within the resync period, with a LoadBalancerDriftRepaired
// event.
func TestClasslessDriftRepairedByDefault(t *testing.T) {
	const ns, period = "drift", 5 * time.Second
	cp, ccm := setup(t, ns, "--load-balancer-resync-period="+period.String())
	ctx := context.Background()
	if _, err := framework.CreateService(ctx, cp.Client, framework.NewLoadBalancerService(ns, "web", framework.WithPort("http", 80, corev1.ProtocolTCP))); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, "web's address", framework.ServiceMatches(cp.Client, ns, "web", framework.HasIngress))
	framework.Eventually(t, 30*time.Second, "web's EnsuredLoadBalancer event from our controller", framework.EventWith(cp.Client, "Service", ns, "web", "EnsuredLoadBalancer", `backend "metal"`))
	// Its conditions (issue 45), as the real API server validates them,
	// and as an operator waits for them.
	for _, cond := range []string{"LoadBalancerReady", "backend.multicloud-ccm.io/metal"} {
		if out, err := cp.Kubectl(ctx, "wait", "-n", ns, "--for=condition="+cond, "--timeout=30s", "service/web"); err != nil {
			t.Errorf("kubectl wait --for=condition=%s: %v\n%s", cond, err, out)
		}
	}
	if log := readLog(t, ccm, 0); !strings.Contains(log, `"service-lb-controller" is disabled`) {
		t.Errorf("upstream's service controller was not reported disabled:\n%s", ccm.Logs(framework.LogLines))
	}
	svc, err := cp.Client.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := framework.IngressIPs(svc)
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "10.99.99.99"}}
	if _, err := cp.Client.CoreV1().Services(ns).UpdateStatus(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	edited := time.Now()
	framework.Eventually(t, 3*period, "the address restored", framework.ServiceMatches(cp.Client, ns, "web", func(s *corev1.Service) (bool, string) {
		got := framework.IngressIPs(s)
		return slices.Equal(got, want), fmt.Sprintf("address %v, want %v", got, want)
	}))
	took := time.Since(edited)
	t.Logf("the address edited by hand was restored %.1fs after the edit (resync period %v)", took.Seconds(), period)
	if took > period+2*time.Second {
		t.Errorf("restored after %v, later than the resync period %v", took, period)
	}
	framework.Eventually(t, 10*time.Second, "the LoadBalancerDriftRepaired event", framework.EventWith(cp.Client, "Service", ns, "web", "LoadBalancerDriftRepaired", "status address restored"))
}

// TestRestartRechecksWithoutWrites: 50 classless Services served by the
// default install; after a restart the new process re-checks them (one
// start-up pass, one summary line), with no write to any Service, no
// event, and no log line naming one at the default verbosity.
func TestRestartRechecksWithoutWrites(t *testing.T) {
	const ns, n = "restart", 50
	cp, ccm := setup(t, ns)
	ctx := context.Background()
	for i := range n {
		if _, err := framework.CreateService(ctx, cp.Client, framework.NewLoadBalancerService(ns, fmt.Sprintf("s%02d", i), framework.WithPort("http", 80, corev1.ProtocolTCP))); err != nil {
			t.Fatal(err)
		}
	}
	framework.Eventually(t, 2*time.Minute, "every Service addressed", allAddressed(cp.Client, ns, n))
	// The events of the creates reach the API server asynchronously.
	framework.Eventually(t, 30*time.Second, "the writes settled", settledWrites(cp))

	if err := ccm.Stop(15 * time.Second); err != nil {
		t.Fatal(err)
	}
	offset := logSize(t, ccm)
	before := writes(t, cp)
	if err := ccm.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, "the start-up pass's summary line", func(context.Context) (bool, string, error) {
		return strings.Contains(readLog(t, ccm, offset), `pass="start-up"`), "not logged yet", nil
	})
	framework.Eventually(t, 30*time.Second, "the writes settled", settledWrites(cp))
	after := writes(t, cp)
	if d := diff(before, after); len(d) > 0 {
		t.Errorf("the restart's re-check wrote: %v", d)
	}
	log := readLog(t, ccm, offset)
	var summary, named []string
	for line := range strings.SplitSeq(log, "\n") {
		switch {
		case strings.Contains(line, `pass="start-up"`):
			summary = append(summary, line)
		case strings.Contains(line, ns+"/"):
			named = append(named, line)
		}
	}
	if len(summary) != 1 || !strings.Contains(summary[0], fmt.Sprintf("services=%d changed=0 failed=0 unfinished=0", n)) {
		t.Errorf("want one summary line (%d Services, none changed or failed), got %q", n, summary)
	}
	if len(named) > 0 {
		t.Errorf("%d log lines name a Service at the default verbosity:\n%s", len(named), strings.Join(named, "\n"))
	}
	t.Logf("restart: %s", strings.TrimSpace(summary[0]))
}

// leaderFlags turn leader election on, with short periods so that a
// standby takes over within seconds of the leader stopping.
var leaderFlags = []string{"--leader-elect=true", "--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=1s"}

// TestFailoverRechecksWithoutWrites: 50 classless Services served by a
// leader; a standby that takes over once the leader stops re-checks them
// (one start-up pass, one summary line) with no write to any Service, no
// event on them, and no log line naming one at the default verbosity.
func TestFailoverRechecksWithoutWrites(t *testing.T) {
	const ns, n = "failover", 50
	cp, leader := setup(t, ns, leaderFlags...)
	ctx := context.Background()
	for i := range n {
		if _, err := framework.CreateService(ctx, cp.Client, framework.NewLoadBalancerService(ns, fmt.Sprintf("s%02d", i), framework.WithPort("http", 80, corev1.ProtocolTCP))); err != nil {
			t.Fatal(err)
		}
	}
	framework.Eventually(t, 2*time.Minute, "every Service addressed", allAddressed(cp.Client, ns, n))
	framework.Eventually(t, 30*time.Second, "the writes settled", settledWrites(cp))
	standby := cp.StartCCMT(t, framework.CCMOptions{Name: "standby", CloudConfig: cloudConfig, ExtraArgs: append(slices.Clone(binaryDefaults), leaderFlags...)})
	before, events := writes(t, cp), eventCount(t, cp, ns)
	if err := leader.Stop(15 * time.Second); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, "the standby's start-up pass as the new leader", func(context.Context) (bool, string, error) {
		return strings.Contains(readLog(t, standby, 0), `pass="start-up"`), "not logged yet", nil
	})
	framework.Eventually(t, 30*time.Second, "the writes settled", settledWrites(cp))
	for k, d := range diff(before, writes(t, cp)) {
		if strings.Contains(k, "services") {
			t.Errorf("the new leader's re-check wrote: %s +%d", k, d)
		}
	}
	if got := eventCount(t, cp, ns); got != events {
		t.Errorf("the new leader's re-check recorded %d events on the Services", got-events)
	}
	var summary, named []string
	for line := range strings.SplitSeq(readLog(t, standby, 0), "\n") {
		switch {
		case strings.Contains(line, `pass="start-up"`):
			summary = append(summary, line)
		case strings.Contains(line, ns+"/"):
			named = append(named, line)
		}
	}
	if len(summary) != 1 || !strings.Contains(summary[0], fmt.Sprintf("services=%d changed=0 failed=0 unfinished=0", n)) {
		t.Errorf("want one summary line (%d Services, none changed or failed), got %q", n, summary)
	}
	if len(named) > 0 {
		t.Errorf("%d log lines name a Service at the default verbosity:\n%s", len(named), strings.Join(named, "\n"))
	}
	t.Logf("failover: %s", strings.TrimSpace(summary[0]))
}

// eventCount counts the events in namespace ns, repeats included.
func eventCount(t *testing.T, cp *framework.ControlPlane, ns string) int {
	t.Helper()
	list, err := cp.Client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range list.Items {
		n += int(max(e.Count, 1))
	}
	return n
}

func allAddressed(c kubernetes.Interface, ns string, n int) framework.Condition {
	return func(ctx context.Context) (bool, string, error) {
		list, err := c.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		done := 0
		for _, s := range list.Items {
			if len(s.Status.LoadBalancer.Ingress) > 0 {
				done++
			}
		}
		return done == n, fmt.Sprintf("%d of %d addressed", done, n), nil
	}
}

// settledWrites holds once the write counters stayed the same for 3 s.
func settledWrites(cp *framework.ControlPlane) framework.Condition {
	var last map[string]int
	var since time.Time
	return func(ctx context.Context) (bool, string, error) {
		cur, err := writesNow(ctx, cp)
		if err != nil {
			return false, err.Error(), nil
		}
		if last == nil || len(diff(last, cur)) > 0 {
			last, since = cur, time.Now()
		}
		return time.Since(since) >= 3*time.Second, "writes still moving", nil
	}
}

func writes(t *testing.T, cp *framework.ControlPlane) map[string]int {
	t.Helper()
	w, err := writesNow(context.Background(), cp)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// writesNow reads kube-apiserver's apiserver_request_total of the mutating
// verbs on Services (status included) and Events, by "verb resource/sub".
func writesNow(ctx context.Context, cp *framework.ControlPlane) (map[string]int, error) {
	raw, err := cp.Client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	counts := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		labels, ok := strings.CutPrefix(line, "apiserver_request_total{")
		if !ok {
			continue
		}
		verb, resource, sub := label(labels, "verb"), label(labels, "resource"), label(labels, "subresource")
		if (resource != "services" && resource != "events") || !slices.Contains([]string{"POST", "PUT", "PATCH", "DELETE", "APPLY"}, verb) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			return nil, err
		}
		counts[strings.TrimSuffix(verb+" "+resource+"/"+sub, "/")] += int(v)
	}
	return counts, nil
}

func label(labels, name string) string {
	_, rest, ok := strings.Cut(labels, name+`="`)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, `"`)
	return v
}

// diff is the counters that moved, with by how much.
func diff(before, after map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

func logSize(t *testing.T, ccm *framework.CCM) int64 {
	t.Helper()
	fi, err := os.Stat(ccm.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// readLog returns the CCM's log from offset on.
func readLog(t *testing.T, ccm *framework.CCM, offset int64) string {
	t.Helper()
	b, err := os.ReadFile(ccm.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	return string(b[min(offset, int64(len(b))):])
}
