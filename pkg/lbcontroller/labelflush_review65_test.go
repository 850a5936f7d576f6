package lbcontroller

// Review probe (65) of fd09428: a node's label change asks no per-Service
// question while a flush of node changes is coming or running
// (flushComing), and counts as a node change instead.

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	utilt "github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
)

// TestReview65TargetLabelDuringARunningFlush: web's NLB (IP targets)
// targets only nodes labelled pool=web
// (aws-load-balancer-target-node-labels). A flush is held in its
// comparison of web, after it listed the nodes (worker-1 without the
// label); worker-1 gets pool=web meanwhile. The handler asks nothing (a
// flush runs) and must make the flush run again: the operator expects
// worker-1 registered once the flush ends, with no other node change.
// The handler's own question would block on the held gate too: the probe
// also fails (times out) if the handler asks while a flush runs.
func TestReview65TargetLabelDuringARunningFlush(t *testing.T) {
	running, vpcID := runAWSFake(t)
	var g *gatedTargets
	o := envOptions{doc: fmt.Sprintf(awsConfig, running.URL, vpcID), nodeQuiet: 10 * time.Millisecond, nodeMax: 50 * time.Millisecond,
		wrap: func(h *hookedCloud) Cloud {
			g = &gatedTargets{routerTargets: routerTargets{h}, entered: make(chan struct{}, 1), release: make(chan struct{})}
			return g
		}}
	e := startEnv(t, o)
	nodes := e.client.CoreV1().Nodes()
	ctx := context.Background()
	label := func(name, k, v string) {
		t.Helper()
		n, err := nodes.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Labels[k] = v
		if _, err := nodes.Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	label("worker-0", "pool", "web")
	if _, err := nodes.Create(ctx, utilt.NewNode("worker-1", utilt.WithProviderID("baremetal://worker-1"), utilt.WithInternalIP("10.0.0.11")), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.create(t, utilt.NewService("web", utilt.WithClass(awsIPClass),
		utilt.WithAnnotation("service.beta.kubernetes.io/aws-load-balancer-target-node-labels", "pool=web")))
	targets := func(want ...string) func() error {
		return func() error {
			if got := ipTargets(running); !slices.Equal(got, want) {
				return fmt.Errorf("IP targets %v, want %v", got, want)
			}
			return nil
		}
	}
	waitFor(t, time.Minute, "web's NLB targeting worker-0 alone", func() error {
		if s := e.get(t, "web"); len(s.Status.LoadBalancer.Ingress) == 0 {
			return fmt.Errorf("no address yet; events %v", e.events(t, "web"))
		}
		return targets("10.0.0.10")()
	})
	time.Sleep(300 * time.Millisecond) // the set-up's batches flushed

	g.armed.Store(true)
	var once sync.Once
	release := func() { once.Do(func() { g.armed.Store(false); close(g.release) }) }
	t.Cleanup(release)
	// worker-2 (not labelled: no target of web) opens a batch; its flush
	// is held comparing web.
	if _, err := nodes.Create(ctx, utilt.NewNode("worker-2", utilt.WithProviderID("baremetal://worker-2"), utilt.WithInternalIP("10.0.0.12")), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-g.entered:
	case <-time.After(30 * time.Second):
		t.Fatal("no flush asked for web's targets after worker-2 was added")
	}
	label("worker-1", "pool", "web")
	time.Sleep(300 * time.Millisecond) // the label's batch closes while the flush is held
	release()
	waitFor(t, 30*time.Second, "worker-1 registered once labelled during the flush", targets("10.0.0.10", "10.0.0.11"))
}
