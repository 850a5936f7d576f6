package lbcontroller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/multicloud-ccm/multicloud-ccm/internal/awsfake"
	utilt "github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
)

// review64GroupTargets are the IP targets of each target group, by group
// name, each list sorted.
func review64GroupTargets(f *awsfake.Running) map[string][]string {
	out := map[string][]string{}
	for _, tg := range f.TargetGroups() {
		var ips []string
		for _, tgt := range tg.Targets {
			ip, _, _ := strings.Cut(tgt, ":")
			ips = append(ips, ip)
		}
		slices.Sort(ips)
		out[tg.Name] = ips
	}
	return out
}

// review64Every checks that there are want groups, each with the targets
// ips.
func review64Every(f *awsfake.Running, groups int, ips ...string) error {
	got := review64GroupTargets(f)
	if len(got) != groups {
		return fmt.Errorf("target groups %v, want %d", got, groups)
	}
	for name, have := range got {
		if !slices.Equal(have, ips) {
			return fmt.Errorf("group %s targets %v, want %v (all: %v)", name, have, ips, got)
		}
	}
	return nil
}

// TestReview64NodeSyncFailingHalfWayIsFinished drives the controller over
// the router and the AWS backend (IP targets of one of our classes): a
// two-port Service, a node excluded, and the node sync's second write
// fails (its first, the DeregisterTargets of one group, went through).
// The backend's verified view must not be left claiming the change made:
// the operator expects the controller's retry to finish it, both groups
// without the excluded node, and nothing else changed.
func TestReview64NodeSyncFailingHalfWayIsFinished(t *testing.T) {
	svc := utilt.NewService("web", utilt.WithClass(awsIPClass),
		utilt.WithPorts(utilt.Port(corev1.ProtocolTCP, 80, 30080), utilt.Port(corev1.ProtocolTCP, 443, 30443)))
	e, f := startAWS(t, envOptions{nodeQuiet: 10 * time.Millisecond, nodeMax: 50 * time.Millisecond}, *svc)
	ctx := context.Background()
	for i, ip := range []string{"10.0.0.11", "10.0.0.12"} {
		n := utilt.NewNode(fmt.Sprintf("worker-%d", i+1), utilt.WithProviderID(fmt.Sprintf("baremetal://worker-%d", i+1)), utilt.WithInternalIP(ip))
		if _, err := e.client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, time.Minute, "both groups with the three nodes", func() error {
		if s := e.get(t, "web"); len(s.Status.LoadBalancer.Ingress) == 0 {
			return fmt.Errorf("no address yet; events %v", e.events(t, "web"))
		}
		return review64Every(f, 2, "10.0.0.10", "10.0.0.11", "10.0.0.12")
	})

	f.ResetCalls()
	f.FailMutationsAfter(1)
	n, err := e.client.CoreV1().Nodes().Get(ctx, "worker-2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Labels["node.kubernetes.io/exclude-from-external-load-balancers"] = "true"
	if _, err := e.client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the node sync's second write refused", func() error {
		if got := f.Calls("DeregisterTargets"); got < 2 {
			return fmt.Errorf("DeregisterTargets %d", got)
		}
		return nil
	})
	if err := review64Every(f, 2, "10.0.0.10", "10.0.0.11"); err == nil {
		t.Fatal("setup: both groups changed although the second write was refused")
	}
	f.ClearMutationFailures()
	waitFor(t, time.Minute, "both groups without the excluded node", func() error {
		return review64Every(f, 2, "10.0.0.10", "10.0.0.11")
	})
	if m := f.MutatingCalls(); slices.Contains(m, "CreateTargetGroup") || slices.Contains(m, "DeleteListener") {
		t.Errorf("finishing a node sync made %v", m)
	}
}
