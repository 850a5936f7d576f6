package lbcontroller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	utilt "github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/providerid"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router"
)

// reloadAfterEnsure is the hooked router whose next EnsureLoadBalancer,
// once armed, runs hook after the router's call returned and before the
// controller remembers the targets (ensuredTargets).
type reloadAfterEnsure struct {
	routerTargets
	mu   *sync.Mutex
	hook *func()
}

func (r reloadAfterEnsure) EnsureLoadBalancer(ctx context.Context, clusterName string, svc *corev1.Service, nodes []*corev1.Node) (*corev1.LoadBalancerStatus, error) {
	st, err := r.routerTargets.EnsureLoadBalancer(ctx, clusterName, svc, nodes)
	r.mu.Lock()
	hook := *r.hook
	*r.hook = nil
	r.mu.Unlock()
	if hook != nil {
		hook()
	}
	return st, err
}

// withOtherCCMsNodes is countConfig with loadBalancer.targetOtherCCMsNodes:
// gce-1 (the platform annotation gce, which no backend of the config
// serves: another CCM's node) becomes a target of the counttest backends
// (it has an InternalIP).
func withOtherCCMsNodes(doc string) string {
	return strings.Replace(doc, "loadBalancer:\n", "loadBalancer:\n  targetOtherCCMsNodes: true\n", 1)
}

// TestReloadChangingOwnNodesRetargets (review probe s57, pre-existing,
// found while probing 58d491a's live reload): a reload that changes which
// nodes a backend can target (loadBalancer.targetOtherCCMsNodes: gce-1,
// another CCM's node, joins the targets of counta) re-targeted no load
// balancer: Reloaded re-synced only the Services whose routing changed
// (classes, backends, the default), and no node changed, so no node sync
// ran. The load balancer kept the old configuration's nodes until some
// node change made a flush compare. Reloaded now counts such a reload as
// a node change: one UpdateLoadBalancer.
func TestReloadChangingOwnNodesRetargets(t *testing.T) {
	reloadProbe(t, false)
}

// TestReloadBetweenEnsureAndRemember (review probe s57 of 58d491a, live
// reload): the same reload lands after the Service's EnsureLoadBalancer
// handed counta its nodes on the old configuration and before the
// controller remembered the targets. The controller remembered the new
// configuration's answer (LoadBalancerTargetsEnsured asked again when the
// Balancer was another: what the call handed was "not used"), which is
// not what the load balancer was handed: even with a node sync after the
// reload the fingerprint already equalled targetsOf's, and the load
// balancer kept the old configuration's nodes until this Service's set
// of targets changed. The configuration the call ran on now answers, from
// what it handed; the reload's node change (Reloaded) re-queues the
// Service, whose sync finds the difference: one UpdateLoadBalancer.
func TestReloadBetweenEnsureAndRemember(t *testing.T) {
	reloadProbe(t, true)
}

// reloadEnv is the counting env with gce-1, a node of another CCM (the
// platform annotation gce, which no backend serves), and a router that
// runs hook, once armed, between the router's EnsureLoadBalancer and the
// controller's recording of its targets.
func reloadEnv(t *testing.T, mu *sync.Mutex, hook *func()) *env {
	registerCountType()
	return startEnv(t, envOptions{doc: countConfig("0s"), classless: true, versioned: true, reloadable: true,
		nodeQuiet: 10 * time.Millisecond, nodeMax: 50 * time.Millisecond,
		wrap: func(h *hookedCloud) Cloud { return reloadAfterEnsure{routerTargets{h}, mu, hook} }},
		append(countNodeObjects(), k8sruntime.Object(utilt.NewNode("gce-1", utilt.WithInternalIP("10.0.2.1"),
			func(n *corev1.Node) { n.Annotations = map[string]string{providerid.PlatformAnnotation: "gce"} })))...)
}

// withGCE1 are counta's members once gce-1 is a target.
var withGCE1 = []string{"count-0", "count-1", "count-2", "gce-1", "worker-0"}

func reloadProbe(t *testing.T, between bool) {
	var (
		mu   sync.Mutex
		hook func()
	)
	e := reloadEnv(t, &mu, &hook)
	a := countBackend(t, countAIP)
	reload := func() { e.reload(t, withOtherCCMsNodes(countConfig("0s"))) }
	if between {
		mu.Lock()
		hook = reload
		mu.Unlock()
	}
	e.create(t, utilt.NewService("web"))
	waitFor(t, 30*time.Second, "web served by counta", synced(e, t, "web", 1))
	uid := string(e.get(t, "web").UID)
	if !between {
		if got := a.membersOf(uid); slices.Contains(got, "gce-1") {
			t.Fatalf("before the reload counta's members %v hold gce-1: the test proves nothing", got)
		}
		reload()
	}
	waitFor(t, 5*time.Second, "counta's load balancer targets gce-1 (the reload's targets)", func() error {
		if got := a.membersOf(uid); !slices.Equal(got, withGCE1) {
			return fmt.Errorf("members %v, want %v; controller's updates %d, fingerprint %+v", got, withGCE1, e.cloud.updates.Load(), e.ctrl.stateOf("default/web").nodes)
		}
		return nil
	})
	time.Sleep(300 * time.Millisecond)
	if n := e.cloud.updates.Load(); n != 1 {
		t.Errorf("%d UpdateLoadBalancer calls, want 1", n)
	}
}

// TestReloadKeepingTargetsUpdatesNothing: a reload that changes nothing
// about which nodes a backend targets (the drain period; the same config
// again) starts no node sync and makes no cloud call; one that does
// (targetOtherCCMsNodes) updates each served Service's load balancer
// once, and ensures none.
func TestReloadKeepingTargetsUpdatesNothing(t *testing.T) {
	var (
		mu   sync.Mutex
		hook func()
	)
	e := reloadEnv(t, &mu, &hook)
	a := countBackend(t, countAIP)
	names := []string{"web", "api", "db"}
	for _, n := range names {
		e.create(t, utilt.NewService(n))
	}
	for _, n := range names {
		waitFor(t, 30*time.Second, n+" served by counta", synced(e, t, n, 1))
	}
	time.Sleep(300 * time.Millisecond)
	ensures, updates, gen := e.cloud.ensures.Load(), e.cloud.updates.Load(), e.ctrl.nodeGen.Load()
	quiet := func(what string) {
		t.Helper()
		time.Sleep(300 * time.Millisecond) // many node batches (10 ms quiet, 50 ms at most)
		if got := e.ctrl.nodeGen.Load(); got != gen {
			t.Errorf("%s: %d node changes counted", what, got-gen)
		}
		if got := e.cloud.ensures.Load(); got != ensures {
			t.Errorf("%s: %d EnsureLoadBalancer calls", what, got-ensures)
		}
		if got := e.cloud.updates.Load(); got != updates {
			t.Errorf("%s: %d UpdateLoadBalancer calls", what, got-updates)
		}
	}
	e.reload(t, countConfig("30s"))
	quiet("a reload of the drain period")
	e.reload(t, countConfig("30s"))
	quiet("the same config again")

	e.reload(t, withOtherCCMsNodes(countConfig("30s")))
	for _, n := range names {
		uid := string(e.get(t, n).UID)
		waitFor(t, 5*time.Second, n+"'s load balancer targets gce-1", func() error {
			if got := a.membersOf(uid); !slices.Equal(got, withGCE1) {
				return fmt.Errorf("members %v, want %v", got, withGCE1)
			}
			return nil
		})
	}
	time.Sleep(300 * time.Millisecond)
	if got := e.cloud.updates.Load() - updates; got != int32(len(names)) {
		t.Errorf("%d UpdateLoadBalancer calls after the reload turning targetOtherCCMsNodes on, want %d (one per Service)", got, len(names))
	}
	if got := e.cloud.ensures.Load(); got != ensures {
		t.Errorf("%d EnsureLoadBalancer calls after the reload turning targetOtherCCMsNodes on, want none", got-ensures)
	}
	ensures, updates, gen = e.cloud.ensures.Load(), e.cloud.updates.Load(), e.ctrl.nodeGen.Load()
	e.reload(t, withOtherCCMsNodes(countConfig("30s")))
	quiet("the same config again, after")
}

// TestNodeTargetsChanged: which reloads count as a node change. The
// rules compare by what they say, not by their compiled expressions
// (each Parse compiles its own: reflect.DeepEqual would call every
// reload with a nodeNameRegex rule a change).
func TestNodeTargetsChanged(t *testing.T) {
	registerCountType()
	parse := func(doc string) *config.CloudConfig {
		t.Helper()
		cfg, err := config.Parse([]byte(doc), t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	withNodes := func(section string) string { return countConfig("0s") + "nodes:\n" + section }
	rules := withNodes("  rules:\n  - {backend: counta, nodeNameRegex: '^count-'}\n")
	for _, tc := range []struct {
		name       string
		prev, next string
		ch         router.Changes
		want       bool
	}{
		{name: "the same config", prev: countConfig("0s"), next: countConfig("0s")},
		{name: "the drain period", prev: countConfig("0s"), next: countConfig("30s")},
		{name: "the same rules", prev: rules, next: rules},
		{name: "nodes.unmanaged", prev: countConfig("0s"), next: withNodes("  unmanaged: ignore\n")},
		{name: "a backend retuned", prev: countConfig("0s"), next: countConfig("0s"), ch: router.Changes{Retuned: []string{"counta"}}},
		{name: "targetOtherCCMsNodes", prev: countConfig("0s"), next: withOtherCCMsNodes(countConfig("0s")), want: true},
		{name: "nodes.platforms set", prev: countConfig("0s"), next: withNodes("  platforms: [" + countType + "]\n"), want: true},
		{name: "a rule's expression", prev: rules, next: withNodes("  rules:\n  - {backend: counta, nodeNameRegex: '^worker-'}\n"), want: true},
		{name: "a backend added", prev: countConfig("0s"), next: countConfig("0s"), ch: router.Changes{Added: []string{"countc"}}, want: true},
		{name: "a backend rebuilt", prev: countConfig("0s"), next: countConfig("0s"), ch: router.Changes{Rebuilt: []string{"counta"}}, want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.ch.NodeTargetsChanged(parse(tc.prev), parse(tc.next)); got != tc.want {
				t.Errorf("NodeTargetsChanged = %v, want %v", got, tc.want)
			}
		})
	}
}
