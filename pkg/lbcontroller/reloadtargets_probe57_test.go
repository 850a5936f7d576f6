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
	"github.com/multicloud-ccm/multicloud-ccm/pkg/providerid"
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

// TestProbe57ReloadChangingOwnNodesRetargets (pre-existing, found
// while probing 58d491a's live reload): a reload that changes which nodes
// a backend can target (loadBalancer.targetOtherCCMsNodes: gce-1, another
// CCM's node, joins the targets of counta) re-targets no load balancer:
// Reloaded re-syncs only the Services whose routing changed (classes,
// backends, the default), and no node changed, so no node sync runs. The
// load balancer keeps the old configuration's nodes until some node
// change makes a flush compare (the recorded fingerprint differs from
// targetsOf's on the new configuration meanwhile).
func TestProbe57ReloadChangingOwnNodesRetargets(t *testing.T) {
	reloadProbe(t, false, false)
}

// TestProbe57ReloadBetweenEnsureAndRemember (review of 58d491a, live
// reload): the same reload lands after the Service's EnsureLoadBalancer
// handed counta its nodes on the old configuration and before the
// controller remembered the targets. The controller then remembers the
// new configuration's answer (LoadBalancerTargetsEnsured asks again when
// the Balancer is another: what the call handed is "not used"), which is
// not what the load balancer was handed. With a node sync after the
// reload (the fix TestProbe57ReloadChangingOwnNodesRetargets calls for,
// simulated here by nodesChanged) the control ("after the sync")
// re-targets, but this case cannot: the fingerprint already equals
// targetsOf's, the flush queues nothing and the load balancer keeps the
// old configuration's nodes until this Service's set of targets changes.
func TestProbe57ReloadBetweenEnsureAndRemember(t *testing.T) {
	for _, between := range []bool{false, true} {
		name := map[bool]string{false: "after the sync", true: "between ensure and remember"}[between]
		t.Run(name, func(t *testing.T) { reloadProbe(t, between, true) })
	}
}

func reloadProbe(t *testing.T, between, flush bool) {
	registerCountType()
	var (
		mu   sync.Mutex
		hook func()
	)
	e := startEnv(t, envOptions{doc: countConfig("0s"), classless: true, versioned: true, reloadable: true,
		nodeQuiet: 10 * time.Millisecond, nodeMax: 50 * time.Millisecond,
		wrap: func(h *hookedCloud) Cloud { return reloadAfterEnsure{routerTargets{h}, &mu, &hook} }},
		append(countNodeObjects(), k8sruntime.Object(utilt.NewNode("gce-1", utilt.WithInternalIP("10.0.2.1"),
			func(n *corev1.Node) { n.Annotations = map[string]string{providerid.PlatformAnnotation: "gce"} })))...)
	a := countBackend(t, countAIP)
	reload := func() {
		e.reload(t, withOtherCCMsNodes(countConfig("0s")))
		if flush {
			e.ctrl.nodesChanged()
		}
	}
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
			t.Fatalf("before the reload counta's members %v hold gce-1: the probe proves nothing", got)
		}
		reload()
	}
	want := []string{"count-0", "count-1", "count-2", "gce-1", "worker-0"}
	waitFor(t, 5*time.Second, "counta's load balancer targets gce-1 (the reload's targets)", func() error {
		if got := a.membersOf(uid); !slices.Equal(got, want) {
			return fmt.Errorf("members %v, want %v; controller's updates %d, fingerprint %+v", got, want, e.cloud.updates.Load(), e.ctrl.stateOf("default/web").nodes)
		}
		return nil
	})
}
