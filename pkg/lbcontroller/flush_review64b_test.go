package lbcontroller

// Review probes (64b) of the node flush made outside the controller's lock,
// one at a time (commits dc2c602, 3961fa7): node changes and Service
// replacements landing while a flush is held in its comparison.

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	utilt "github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
)

// review64bEnv runs the controller over the counting backends with the
// flush's fingerprint questions gated (gatedTargets), serves web, then
// adds count-4, with no address (no backend targets it: web's targets do
// not change, and the flush queues nothing for it), with the gate armed,
// and waits until a flush is held in its comparison (the only Service:
// its last one). release lets every question through.
func review64bEnv(t *testing.T) (e *env, release func()) {
	t.Helper()
	registerCountType()
	var g *gatedTargets
	e = startEnv(t, envOptions{doc: countConfig("0s"), classless: true, versioned: true,
		nodeQuiet: 10 * time.Millisecond, nodeMax: 50 * time.Millisecond,
		wrap: func(h *hookedCloud) Cloud {
			g = &gatedTargets{routerTargets: routerTargets{h}, entered: make(chan struct{}, 1), release: make(chan struct{})}
			return g
		}}, countNodeObjects()...)
	e.create(t, utilt.NewService("web"))
	waitFor(t, 30*time.Second, "web served", synced(e, t, "web", 1))
	g.armed.Store(true)
	var once sync.Once
	release = func() { once.Do(func() { g.armed.Store(false); close(g.release) }) }
	t.Cleanup(release)
	n := utilt.NewNode("count-4", utilt.WithProviderID(countType+"://count-4"))
	if _, err := e.client.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-g.entered:
	case <-time.After(30 * time.Second):
		t.Fatal("no flush asked for the Service's targets after a node was added")
	}
	return e, release
}

// review64bMembers waits until the counta load balancer of the Service
// with uid has exactly want as members (the nodes handed to it), and stays so for a second (no
// later sync is needed to get there).
func review64bMembers(t *testing.T, e *env, uid types.UID, want []string) {
	t.Helper()
	lb := countBackend(t, countAIP)
	check := func() error {
		if got := lb.membersOf(string(uid)); !slices.Equal(got, want) {
			return fmt.Errorf("members %v, want %v; %d updates", got, want, e.cloud.updates.Load())
		}
		return nil
	}
	waitFor(t, 30*time.Second, "the load balancer's members", check)
	time.Sleep(time.Second)
	if err := check(); err != nil {
		t.Error(err)
	}
}

// TestReview64bNodeDeletedDuringTheLastComparison: a flush is held in the
// comparison of its last Service, after it listed the nodes (count-0
// among them); count-0 is deleted meanwhile and its batch closes while the
// flush still runs (flushAgain). The held flush finds web's targets
// unchanged (count-4 is no target), so only the run the deletion's batch
// asks for can update it. An operator expects the deleted node out of the
// load balancer once the flush ends, with no other change needed: the
// batch must make the flush run again, not be lost between the last
// comparison and flushing=false.
func TestReview64bNodeDeletedDuringTheLastComparison(t *testing.T) {
	e, release := review64bEnv(t)
	if err := e.client.CoreV1().Nodes().Delete(context.Background(), "count-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // the deletion's batch closes while the flush is held
	release()
	review64bMembers(t, e, e.get(t, "web").UID, []string{"count-1", "count-2", "worker-0"})
}

// TestReview64bServiceReplacedDuringFlush: while a flush is held in its
// comparison of web (the snapshot taken before), web is deleted and
// created again under its name (a new UID), and count-0 is deleted. An
// operator expects the new Service's load balancer to target the nodes
// now (count-0 out) and the old one's load balancer gone.
func TestReview64bServiceReplacedDuringFlush(t *testing.T) {
	e, release := review64bEnv(t)
	old := e.get(t, "web")
	gvr := corev1.SchemeGroupVersion.WithResource("services")
	if err := e.client.Tracker().Delete(gvr, "default", "web"); err != nil {
		t.Fatal(err)
	}
	fresh := utilt.NewService("web")
	fresh.UID = types.UID("uid-web-review64b")
	fresh.ResourceVersion = "900000"
	if err := e.client.Tracker().Create(gvr, fresh, "default"); err != nil {
		t.Fatal(err)
	}
	if err := e.client.CoreV1().Nodes().Delete(context.Background(), "count-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	release()
	review64bMembers(t, e, fresh.UID, []string{"count-1", "count-2", "worker-0"})
	if m := countBackend(t, countAIP).membersOf(string(old.UID)); len(m) > 0 {
		t.Errorf("the replaced Service's load balancer is left with members %v", m)
	}
}
