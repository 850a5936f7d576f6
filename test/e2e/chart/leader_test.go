package chart

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/framework"
)

// Leader-election timings of this test (the chart passes them as args).
const (
	leaseDuration = 8 * time.Second
	renewDeadline = 5 * time.Second
	retryPeriod   = 1 * time.Second
)

// TestLeaderElectionFailover runs two replicas of the chart's CCM (its HA
// flags, its RBAC, its ServiceAccount's token) against the real API server,
// kills the leader with SIGKILL, and checks that the other replica takes
// the lease within the lease duration (plus one retry period) of the
// leader's last renewal, and that the Nodes and Services already handled
// stay exactly as they were while the new leader keeps serving new ones.
func TestLeaderElectionFailover(t *testing.T) {
	cp := suite.ControlPlane(t)
	ctx := ctxFor(t)
	const lease = "mccm-le"
	manifest := mustRender(t, "-f", "testdata/e2e/baremetal.yaml", "--set", "replicaCount=2",
		"--set", "fullnameOverride=mccm-le", "--set", "leaderElection.leaseName="+lease,
		"--set", "args.leader-elect-lease-duration="+leaseDuration.String(),
		"--set", "args.leader-elect-renew-deadline="+renewDeadline.String(),
		"--set", "args.leader-elect-retry-period="+retryPeriod.String())
	objs := parse(t, manifest)
	installRBAC(t, cp, manifest)
	saNS, saName := chartServiceAccount(t, objs)
	kubeconfig, err := cp.ServiceAccountKubeconfig(ctx, saNS, saName)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := configFromRendering(t, objs)
	if err != nil {
		t.Fatal(err)
	}
	args := ccmArgs(t, objs)
	if v, _ := flagValue(args, "leader-elect"); v != "true" {
		t.Fatalf("two replicas without --leader-elect=true: %v", args)
	}
	var ccms []*framework.CCM
	for _, name := range []string{"replica-a", "replica-b"} {
		c, err := cp.StartCCM(ctx, framework.CCMOptions{Name: name, CloudConfig: cfg, Kubeconfig: kubeconfig, ExtraArgs: args})
		if c != nil && c.Process != nil {
			t.Cleanup(func() {
				_ = c.Stop(15 * time.Second) // the killed leader reports its exit; that is the point
				if t.Failed() {
					t.Log(c.Logs(framework.LogLines))
				}
			})
		}
		if err != nil {
			t.Fatalf("start %s: %v", name, err)
		}
		ccms = append(ccms, c)
	}

	// Work for the first leader.
	if _, err := framework.CreateNode(ctx, cp.Client, framework.NewNode("bm-2", framework.WithProviderID("baremetal://bm-2"))); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, settle, "bm-2 initialised", framework.NodeMatches(cp.Client, "bm-2", func(n *corev1.Node) (bool, string) {
		return !framework.HasTaint(n, framework.UninitializedTaint) && n.Labels[backendLabel] == "metal", fmt.Sprintf("taints %v labels %v", n.Spec.Taints, n.Labels)
	}))
	if _, err := framework.CreateService(ctx, cp.Client, framework.NewLoadBalancerService("default", "le-before", framework.WithPort("http", 80, corev1.ProtocolTCP))); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, settle, "le-before has an address", framework.ServiceMatches(cp.Client, "default", "le-before", framework.HasIngress))
	node, err := cp.Client.CoreV1().Nodes().Get(ctx, "bm-2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	before, err := cp.Client.CoreV1().Services("default").Get(ctx, "le-before", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// Which replica leads: the one whose log says it acquired the lease.
	holder, err := framework.LeaseHolder(ctx, cp.Client, "kube-system", lease)
	if err != nil || holder == "" {
		t.Fatalf("lease holder %q: %v", holder, err)
	}
	leader, follower := leaderOf(t, ccms, lease)
	l, err := cp.Client.CoordinationV1().Leases("kube-system").Get(ctx, lease, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second; got != leaseDuration {
		t.Fatalf("lease duration %s, want the chart's %s", got, leaseDuration)
	}

	// A classed Service (multicloud-ccm's own controller) created just
	// before the kill: its creation is in flight when the leader dies.
	if _, err := framework.CreateService(ctx, cp.Client, framework.NewLoadBalancerService("default", "le-classed",
		framework.WithPort("http", 80, corev1.ProtocolTCP), framework.WithLoadBalancerClass(metalClass))); err != nil {
		t.Fatal(err)
	}
	// Kill the leader: no graceful release of the lease.
	if err := syscall.Kill(leader.PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-leader.Done()
	killed := time.Now()
	l, err = cp.Client.CoordinationV1().Leases("kube-system").Get(ctx, lease, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lastRenew := l.Spec.RenewTime.Time
	var newHolder string
	framework.Eventually(t, 3*leaseDuration, "the follower takes the lease", func(ctx context.Context) (bool, string, error) {
		h, err := framework.LeaseHolder(ctx, cp.Client, "kube-system", lease)
		if err != nil {
			return false, err.Error(), nil
		}
		newHolder = h
		return h != "" && h != holder, "holder " + h, nil
	})
	tookOver := time.Now()
	l, err = cp.Client.CoordinationV1().Leases("kube-system").Get(ctx, lease, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	acquired := l.Spec.AcquireTime.Time
	// A follower counts the lease duration from when it saw the last
	// renewal, and retries every retry period with client-go's jitter (up
	// to 2.2 periods): it may take the lease no earlier than the lease
	// duration after the last renewal (else two leaders), and no later than
	// that plus two jittered retry periods (seeing the renewal, then
	// acquiring) and two seconds of slack for a loaded machine.
	gap := acquired.Sub(lastRenew)
	jittered := time.Duration(2.2 * float64(retryPeriod))
	if limit := leaseDuration + 2*jittered + 2*time.Second; gap > limit {
		t.Errorf("the follower took the lease %s after the leader's last renewal; want at most %s (lease duration %s + 2 x %s + 2s)", gap, limit, leaseDuration, jittered)
	}
	if gap < leaseDuration-100*time.Millisecond {
		t.Errorf("the follower took the lease %s after the leader's last renewal, before the lease (%s) expired", gap, leaseDuration)
	}
	t.Logf("failover: leader killed %s after its last renewal; follower acquired the lease %s after that renewal (observed %s after the kill); lease duration %s",
		killed.Sub(lastRenew).Round(time.Millisecond), gap.Round(time.Millisecond), tookOver.Sub(killed).Round(time.Millisecond), leaseDuration)
	if !acquiredLease(follower, lease) {
		t.Errorf("holder is %q but %s's log does not show it acquiring the lease", newHolder, follower.Name())
	}

	// The new leader serves new work...
	if _, err := framework.CreateService(ctx, cp.Client, framework.NewLoadBalancerService("default", "le-after", framework.WithPort("http", 80, corev1.ProtocolTCP))); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, settle, "le-after has an address", framework.ServiceMatches(cp.Client, "default", "le-after", framework.HasIngress))
	// ...and what the old one handled is untouched: same address, same
	// finalizer, same node (not deleted, not re-tainted, same providerID).
	framework.Consistently(t, 2*leaseDuration, "bm-2 and le-before unchanged after the failover", func(ctx context.Context) (bool, string, error) {
		n, err := cp.Client.CoreV1().Nodes().Get(ctx, "bm-2", metav1.GetOptions{})
		if err != nil {
			return false, "bm-2: " + err.Error(), nil
		}
		if n.UID != node.UID || n.Spec.ProviderID != node.Spec.ProviderID || framework.HasTaint(n, framework.UninitializedTaint) || n.Labels[backendLabel] != "metal" {
			return false, fmt.Sprintf("bm-2 changed: uid %s providerID %q taints %v labels %v", n.UID, n.Spec.ProviderID, n.Spec.Taints, n.Labels), nil
		}
		s, err := cp.Client.CoreV1().Services("default").Get(ctx, "le-before", metav1.GetOptions{})
		if err != nil {
			return false, "le-before: " + err.Error(), nil
		}
		if !slices.Equal(framework.IngressIPs(s), framework.IngressIPs(before)) || !framework.HasCleanupFinalizer(s) {
			return false, fmt.Sprintf("le-before changed: ingress %v (was %v), finalizers %v", framework.IngressIPs(s), framework.IngressIPs(before), s.Finalizers), nil
		}
		return true, "", nil
	})
	after, err := cp.Client.CoreV1().Services("default").Get(ctx, "le-after", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Equal(framework.IngressIPs(after), framework.IngressIPs(before)) {
		t.Errorf("the new leader gave le-after the address of le-before (%v): it does not see the old leader's allocation", framework.IngressIPs(before))
	}
	// The classed Service whose creation the kill interrupted: one address,
	// the finalizer, and no address shared with the others.
	framework.Eventually(t, settle, "le-classed has an address and the finalizer", framework.ServiceMatches(cp.Client, "default", "le-classed", func(s *corev1.Service) (bool, string) {
		ok, seen := framework.HasIngress(s)
		return ok && len(framework.IngressIPs(s)) == 1 && framework.HasCleanupFinalizer(s), seen
	}))
	classed, err := cp.Client.CoreV1().Services("default").Get(ctx, "le-classed", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, other := range []*corev1.Service{before, after} {
		if slices.Equal(framework.IngressIPs(classed), framework.IngressIPs(other)) {
			t.Errorf("le-classed and %s share the address %v", other.Name, framework.IngressIPs(other))
		}
	}
}

// leaderOf returns the replica whose log shows it acquired the lease, and
// the other one. Exactly one must have.
func leaderOf(t *testing.T, ccms []*framework.CCM, lease string) (leader, follower *framework.CCM) {
	t.Helper()
	var leaders []*framework.CCM
	err := framework.WaitFor(context.Background(), 10*time.Second, "a replica logs the lease", func(context.Context) (bool, string, error) {
		leaders = nil
		for _, c := range ccms {
			if acquiredLease(c, lease) {
				leaders = append(leaders, c)
			}
		}
		return len(leaders) > 0, fmt.Sprintf("%d replicas logged it", len(leaders)), nil
	})
	if err != nil || len(leaders) != 1 {
		t.Fatalf("want exactly one replica to have acquired the lease, got %d (%v)", len(leaders), err)
	}
	for _, c := range ccms {
		if c != leaders[0] {
			return leaders[0], c
		}
	}
	return nil, nil
}

// acquiredLease reports whether the CCM's log shows it acquired the lease
// kube-system/lease (client-go's leader election logs it once).
func acquiredLease(c *framework.CCM, lease string) bool {
	b, _ := os.ReadFile(c.LogPath())
	return strings.Contains(string(b), `"Successfully acquired lease" lock="kube-system/`+lease+`"`)
}
