package lbcontroller

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	utilt "github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
)

// gatedTargets is the router's Targeter whose fingerprint questions can
// be held: while armed, each LoadBalancerTargetsByBackend call waits for
// release, and the calls under way are counted (most at once in peak).
type gatedTargets struct {
	routerTargets
	armed   atomic.Bool
	entered chan struct{}
	release chan struct{}
	calls   atomic.Int32
	single  atomic.Int32 // calls about one node: a node handler's question
	now     atomic.Int32
	peak    atomic.Int32
}

func (g *gatedTargets) LoadBalancerTargetsByBackend(svc *corev1.Service, nodes []*corev1.Node) map[string][]*corev1.Node {
	g.calls.Add(1)
	if len(nodes) == 1 {
		g.single.Add(1)
	}
	n := g.now.Add(1)
	defer g.now.Add(-1)
	for {
		p := g.peak.Load()
		if n <= p || g.peak.CompareAndSwap(p, n) {
			break
		}
	}
	if g.armed.Load() {
		select {
		case g.entered <- struct{}{}:
		default:
		}
		<-g.release
	}
	return g.routerTargets.LoadBalancerTargetsByBackend(svc, nodes)
}

// TestFlushDoesNotHoldTheControllerLock: the comparison of every
// Service's targets with the nodes after a batch of node changes (a pass
// over the nodes per Service: seconds at 5,000 nodes and 1,000 Services)
// is made outside the controller's lock, and one flush at a time. Before,
// the flush held c.mu throughout: the node informer's handler, which
// lists the Services served when a node's labels change, waited for it
// (about 30 s a flush in the AWS 5,000-node scale cell under load, with
// thousands of node notifications queued behind it during a churn), and
// so did every sync; and a batch closing during a long flush started a
// second flush beside it.
func TestFlushDoesNotHoldTheControllerLock(t *testing.T) {
	registerCountType()
	var g *gatedTargets
	e := startEnv(t, envOptions{doc: countConfig("0s"), classless: true, versioned: true,
		nodeQuiet: 10 * time.Millisecond, nodeMax: 50 * time.Millisecond,
		wrap: func(h *hookedCloud) Cloud {
			g = &gatedTargets{routerTargets: routerTargets{h}, entered: make(chan struct{}, 1), release: make(chan struct{})}
			return g
		}}, countNodeObjects()...)
	e.create(t, utilt.NewService("web"))
	waitFor(t, 30*time.Second, "web served", synced(e, t, "web", 1))
	updates := e.cloud.updates.Load()

	g.armed.Store(true)
	var once sync.Once
	releaseAll := func() { once.Do(func() { g.armed.Store(false); close(g.release) }) }
	t.Cleanup(releaseAll)
	nodes := e.client.CoreV1().Nodes()
	add := func(name, ip string) {
		t.Helper()
		n := utilt.NewNode(name, utilt.WithProviderID(countType+"://"+name), utilt.WithInternalIP(ip))
		if _, err := nodes.Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	add("count-4", "10.0.1.5")
	select {
	case <-g.entered:
	case <-time.After(30 * time.Second):
		t.Fatal("no flush asked for the Service's targets after a node was added")
	}

	// The flush is under way, held in its comparison. What the node
	// informer's handler and the syncs need must not wait for it.
	served := make(chan int, 1)
	go func() { served <- len(e.ctrl.servedServices()) }()
	select {
	case n := <-served:
		if n != 1 {
			t.Errorf("%d Services served, want 1", n)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("listing the Services served (the node handler's question on a label change) waited for the flush's comparison: the flush holds the controller's lock")
	}
	// More batches close while it runs: they make it run once more, not
	// a second flush beside it.
	add("count-5", "10.0.1.6")
	time.Sleep(200 * time.Millisecond)
	add("count-6", "10.0.1.7")
	time.Sleep(200 * time.Millisecond)
	if p := g.peak.Load(); p != 1 {
		t.Errorf("%d fingerprint questions at once while one flush was held, want 1 (one flush at a time)", p)
	}
	calls := g.calls.Load()
	releaseAll()

	// Once released, the flush runs again for the batches that closed
	// meanwhile, and the load balancer gets the three new nodes.
	waitFor(t, 30*time.Second, "the load balancer updated with the added nodes", func() error {
		st := e.ctrl.stateOf("default/web")
		if st == nil {
			return fmt.Errorf("web not served")
		}
		all, err := e.ctrl.targets()
		if err != nil {
			return err
		}
		if want := e.ctrl.targetsOf(st.svc, all); !want.equal(st.nodes) {
			return fmt.Errorf("recorded %d targets, want %d; %d updates", st.nodes.len(), want.len(), e.cloud.updates.Load()-updates)
		}
		return nil
	})
	if u := e.cloud.updates.Load() - updates; u < 1 || u > 2 {
		t.Errorf("%d UpdateLoadBalancer calls for three added nodes in two flushes, want 1 or 2", u)
	}
	if g.calls.Load() <= calls {
		t.Error("no flush ran after the held one, for the batches that closed meanwhile")
	}
}

// TestLabelChangeDuringAFlushAsksNothing: a node's label change asks, per
// Service served, whether it moves the node into or out of its targets
// (labelsMoveTargets), unless a flush of node changes is coming that
// compares every Service's targets anyway: during a churn each node
// registered again gets its labels in updates of their own, and the
// questions (about 0.1 s a label update at 1,000 Services, 0.5 s at
// 5,000) held up the node handler, and every node change behind it.
func TestLabelChangeDuringAFlushAsksNothing(t *testing.T) {
	registerCountType()
	var g *gatedTargets
	e := startEnv(t, envOptions{doc: countConfig("0s"), classless: true, versioned: true,
		nodeQuiet: time.Second, nodeMax: 2 * time.Second,
		wrap: func(h *hookedCloud) Cloud {
			g = &gatedTargets{routerTargets: routerTargets{h}, entered: make(chan struct{}, 1), release: make(chan struct{})}
			return g
		}}, countNodeObjects()...)
	e.create(t, utilt.NewService("web"))
	waitFor(t, 30*time.Second, "web served", synced(e, t, "web", 1))
	time.Sleep(3 * time.Second) // every batch of the set-up flushed
	nodes := e.client.CoreV1().Nodes()
	label := func(name, k, v string) {
		t.Helper()
		n, err := nodes.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Labels[k] = v
		if _, err := nodes.Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// No flush coming: the handler asks (the control).
	before := g.single.Load()
	label("count-0", "unrelated", "a")
	waitFor(t, 10*time.Second, "the handler's question about the label change", func() error {
		if g.single.Load() == before {
			return fmt.Errorf("no question about one node yet")
		}
		return nil
	})
	// A node added opens a batch; a label change while it is open asks
	// nothing of its own.
	n := utilt.NewNode("count-4", utilt.WithProviderID(countType+"://count-4"), utilt.WithInternalIP("10.0.1.5"))
	if _, err := nodes.Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the batch opened by the node added", func() error {
		if !e.ctrl.nodeBatch.Open() {
			return fmt.Errorf("no batch open")
		}
		return nil
	})
	before = g.single.Load()
	label("count-1", "unrelated", "b")
	waitFor(t, 30*time.Second, "web's load balancer given the added node", func() error {
		st := e.ctrl.stateOf("default/web")
		all, err := e.ctrl.targets()
		if err != nil {
			return err
		}
		if st == nil {
			return fmt.Errorf("web not served")
		}
		if want := e.ctrl.targetsOf(st.svc, all); !want.equal(st.nodes) {
			return fmt.Errorf("recorded %d targets, want %d", st.nodes.len(), want.len())
		}
		return nil
	})
	if d := g.single.Load() - before; d != 0 {
		t.Errorf("%d questions about one node for a label change while a flush was coming, want 0", d)
	}
}
