package fence

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
	"k8s.io/apimachinery/pkg/types"

	"github.com/multicloud-ccm/multicloud-ccm/internal/awsfake"
	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/framework"
)

// awsConfigTemplate is one aws backend against the wire fake, the default
// for load balancers. %[1]s is the fake's URL, %[2]s the VPC; each
// replica signs with an access key of its own (E2E_AWS_ACCESS_KEY_ID), so
// that the fake tells their requests apart.
const awsConfigTemplate = `apiVersion: multicloud-ccm.io/v1alpha1
kind: CloudConfig
clusterID: e2e-fence
loadBalancer: {defaultBackend: aws}
backends:
- name: aws
  type: aws
  aws:
    region: eu-west-1
    vpc: %[2]s
    endpoints: {ec2: %[1]q, elbv2: %[1]q, sts: %[1]q}
    credentials:
      accessKeyID: {env: E2E_AWS_ACCESS_KEY_ID}
      secretAccessKey: {env: E2E_AWS_SECRET_ACCESS_KEY}
    instanceCacheTTL: 2s
    retry: {maxAttempts: 2, maxBackoff: 200ms}
`

// TestResumedLeaderMakesNoCloudCall: replica A leads with an aws backend
// against the wire fake and serves a Service with an NLB; it is stopped
// with SIGSTOP; while it is stopped that Service's port changes and
// another Service of type LoadBalancer appears, and replica B (which runs
// no load-balancer controller, so both are left to A's stale view) takes
// the lease. Resumed (SIGCONT), A believes it leads until its elector
// notices, and wants to change the first NLB's listeners and target
// groups (no API write comes first: the API fence alone does not stop
// it) and to create an NLB for the second (chaos seeds 556087332 and
// 989441625: an NLB nobody wants after a pause). With the fence, the fake
// receives no mutating request signed with A's key after the pause, A
// logs its refused cloud mutations, no NLB or target group is added, and
// A exits; with --leader-elect-fence=false the same scenario makes them,
// which shows the check can fail.
func TestResumedLeaderMakesNoCloudCall(t *testing.T) {
	cp := framework.StartControlPlaneT(t)
	ctx := context.Background()
	fake := awsfake.New("eu-west-1")
	seeded := fake.Seed(awsfake.SeedSpec{ClusterID: "e2e-fence", Instances: 1})
	running, err := fake.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = running.Close() })
	in := seeded.Instances[0]
	if _, err := framework.CreateNode(ctx, cp.Client, framework.NewNode(in.PrivateDNSName,
		framework.WithProviderID(fmt.Sprintf("aws:///%s/%s", in.Zone, in.ID)), framework.WithoutUninitializedTaint(),
		framework.WithReady(corev1.ConditionTrue),
		framework.WithAddresses(corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: in.PrivateIPs[0]}))); err != nil {
		t.Fatal(err)
	}
	config := fmt.Sprintf(awsConfigTemplate, running.URL, seeded.VPCID)
	for _, tc := range []struct {
		name   string
		fenced bool
	}{{"fenced", true}, {"unfenced", false}} {
		t.Run(tc.name, func(t *testing.T) {
			keyA := "AKIDA" + strings.ToUpper(tc.name)
			var lbs0, tgs0 int
			before := func() { lbs0, tgs0 = len(running.LoadBalancers()), len(running.TargetGroups()) }
			after, refusals := pauseAndResumeCloud(t, cp, config, "cloud-"+tc.name, keyA, tc.fenced, before)
			var mine []string
			for _, r := range running.MutatingRequests() {
				if r.AccessKey == keyA && r.At.After(after) {
					mine = append(mine, r.Action+" at "+r.At.Format("15:04:05.000"))
				}
			}
			lbs, tgs := len(running.LoadBalancers())-lbs0, len(running.TargetGroups())-tgs0
			if !tc.fenced {
				if len(mine) == 0 || lbs == 0 {
					t.Errorf("without the fence the resumed leader made %d mutating calls and %d NLBs exist: the scenario does not reproduce the leak", len(mine), lbs)
				}
				t.Logf("without the fence the resumed leader made %d mutating cloud calls (%d NLBs, %d target groups left): %s", len(mine), lbs, tgs, strings.Join(mine, ", "))
				return
			}
			if len(mine) > 0 {
				t.Errorf("the resumed leader made %d mutating cloud calls after its pause: %s", len(mine), strings.Join(mine, ", "))
			}
			if lbs != 0 || tgs != 0 {
				t.Errorf("%d NLBs and %d target groups were added after the pause, want none: leaked", lbs, tgs)
			}
			if refusals == 0 {
				t.Error("the resumed leader logged no refused cloud mutation: the scenario gave it nothing to do, the check proves nothing")
			}
			if !t.Failed() {
				t.Logf("the resumed leader logged %d refused cloud mutation lines (one per 10 s at most), made no mutating cloud call, and exited", refusals)
			}
		})
	}
}

// pauseAndResumeCloud runs the scenario on lease "mccm-<name>", A signing
// with keyA, calls before just before A is stopped, and returns when A
// was stopped and how many refused cloud mutations it logged. It deletes
// the Services when it ends.
func pauseAndResumeCloud(t *testing.T, cp *framework.ControlPlane, config, name, keyA string, fenced bool, before func()) (time.Time, int) {
	t.Helper()
	ctx := context.Background()
	lease := "mccm-" + name
	args := append(leaderFlags(lease), "--leader-elect-fence="+fmt.Sprint(fenced))
	env := func(key string) []string {
		return []string{"E2E_AWS_ACCESS_KEY_ID=" + key, "E2E_AWS_SECRET_ACCESS_KEY=e2e-fake-secret"}
	}
	a := startCCM(t, cp, framework.CCMOptions{Name: "a-" + name, CloudConfig: config, Env: env(keyA), ExtraArgs: args})
	framework.Eventually(t, time.Minute, "replica A leads", logContains(a, "Successfully acquired lease"))
	b := startCCM(t, cp, framework.CCMOptions{Name: "b-" + name, CloudConfig: config, Env: env("AKIDB" + strings.ToUpper(name)),
		ExtraArgs: append(slices.Clone(args), "--controllers=*,-multicloud-load-balancer,-cloud-node-controller")})
	holderA, err := framework.LeaseHolder(ctx, cp.Client, "kube-system", lease)
	if err != nil || holderA == "" {
		t.Fatalf("lease holder %q: %v", holderA, err)
	}
	served := "served-" + name
	if _, err := framework.CreateService(ctx, cp.Client, framework.NewLoadBalancerService("default", served, framework.WithPort("http", 80, corev1.ProtocolTCP))); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cp.Client.CoreV1().Services("default").Delete(context.Background(), served, metav1.DeleteOptions{})
	})
	framework.Eventually(t, time.Minute, "A serves "+served+" with an NLB", framework.ServiceMatches(cp.Client, "default", served, func(s *corev1.Service) (bool, string) {
		return len(s.Status.LoadBalancer.Ingress) > 0 && s.Status.LoadBalancer.Ingress[0].Hostname != "", fmt.Sprintf("status %+v", s.Status.LoadBalancer)
	}))
	before()

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
	patch := `{"spec":{"ports":[{"name":"http","protocol":"TCP","port":8080,"targetPort":8080}]}}`
	if _, err := cp.Client.CoreV1().Services("default").Patch(ctx, served, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	svcName := "nlb-" + name
	if _, err := framework.CreateService(ctx, cp.Client, framework.NewLoadBalancerService("default", svcName, framework.WithPort("http", 80, corev1.ProtocolTCP))); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cp.Client.CoreV1().Services("default").Delete(context.Background(), svcName, metav1.DeleteOptions{})
	})
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
	log, _ := os.ReadFile(a.LogPath())
	return paused, strings.Count(string(log), "Refused a cloud mutation")
}
