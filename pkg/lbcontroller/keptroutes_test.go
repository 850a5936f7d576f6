package lbcontroller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
)

// The ways a Service's routing can leave the backends serving it for one
// that does not serve it (yet), each keeping the load balancers it had
// (make before break): its annotation changed, the config's default moved
// (a reload, as a restart on a new config), its class moved to another
// backend, the backend it moves to refusing it (an address it cannot
// give) or failing (a cloud down), one backend kept or several. In every
// one the kept load balancers still serve, so the nodes must reach them
// while the sync fails (retargetFailed: Router.UpdateLoadBalancer goes
// to the backends serving the Service while its targets moved).
// TestPlanMatchesSwitchRandomWorldOnOpenStack (seed 1796541842655857086,
// s3) found a kept NLB left with the nodes of before the switch.

// keptRoute is one way of moving web away from the backends serving it.
type keptRoute struct {
	name string
	// lb: the config's loadBalancer lines after drainPeriod (the same
	// before and after a reload); class: web's class.
	lb, class string
	// ann: web's annotations when created.
	ann map[string]string
	// restarted: web exists when the controller starts, served by ma
	// before (its record, served-by and address, as the CCM before left
	// them), with ann: the controller starting on a new config is the
	// move (move is nil).
	restarted bool
	// move moves it (e has membertest backends ma, mb).
	move func(t *testing.T, e *env, mb *memberCloud)
	// kept: the backends that must keep serving it.
	kept []string
}

var refusingIPs = ptrTo("0.0.0.0") // bare metal cannot give it: refused

func keptRoutes() []keptRoute {
	toMetal := func(t *testing.T, e *env, _ *memberCloud) {
		e.edit(t, "web", map[string]*string{string(annotation.LoadBalancerBackend): ptrTo("metal"), string(annotation.LoadBalancerIPs): refusingIPs})
	}
	reloadTo := func(from, to string) func(*testing.T, *env, *memberCloud) {
		return func(t *testing.T, e *env, _ *memberCloud) {
			e.reload(t, strings.Replace(fmt.Sprintf(keptConfig, "203.0.113.91", "203.0.113.92"), "  drainPeriod: 0s\n", "  drainPeriod: 0s\n"+strings.ReplaceAll(from, "ma", to), 1))
		}
	}
	backendIs := func(b string) map[string]string {
		return map[string]string{string(annotation.LoadBalancerBackend): b}
	}
	return []keptRoute{
		{name: "annotation moved, metal refusing", ann: backendIs("ma"), move: toMetal, kept: []string{"ma"}},
		{name: "annotation removed, the default refusing", lb: "  defaultBackend: metal\n", ann: backendIs("ma"),
			move: func(t *testing.T, e *env, _ *memberCloud) {
				e.edit(t, "web", map[string]*string{string(annotation.LoadBalancerBackend): nil, string(annotation.LoadBalancerIPs): refusingIPs})
			}, kept: []string{"ma"}},
		{name: "default moved, metal refusing", lb: "  defaultBackend: ma\n", ann: map[string]string{string(annotation.LoadBalancerIPs): *refusingIPs},
			move: reloadTo("  defaultBackend: ma\n", "metal"), kept: []string{"ma"}},
		{name: "class moved, metal refusing", lb: "  classes: [{name: " + ourClass + ", backend: ma}]\n", class: ourClass,
			ann: map[string]string{string(annotation.LoadBalancerIPs): *refusingIPs}, move: reloadTo("  classes: [{name: "+ourClass+", backend: ma}]\n", "metal"), kept: []string{"ma"}},
		{name: "annotation moved, mb failing", ann: backendIs("ma"),
			move: func(t *testing.T, e *env, mb *memberCloud) {
				mb.failWith(errors.New("the cloud is unavailable"))
				e.moveTo(t, "web", "mb")
			}, kept: []string{"ma"}},
		{name: "several kept, metal refusing", ann: backendIs("ma,mb"), move: toMetal, kept: []string{"ma", "mb"}},
		{name: "restarted with the default moved, metal refusing", lb: "  defaultBackend: metal\n", restarted: true,
			ann: map[string]string{string(annotation.LoadBalancerIPs): *refusingIPs}, kept: []string{"ma"}},
	}
}

// TestKeptLoadBalancersGetTheNodesWhateverMovedThem: for each keptRoute,
// web served, then moved: the move fails (its sync retried), the served
// backends kept; worker-1 joining, then leaving, must reach each kept
// load balancer.
func TestKeptLoadBalancersGetTheNodesWhateverMovedThem(t *testing.T) {
	for _, k := range keptRoutes() {
		t.Run(k.name, func(t *testing.T) {
			doc := strings.Replace(fmt.Sprintf(keptConfig, "203.0.113.91", "203.0.113.92"), "  drainPeriod: 0s\n", "  drainPeriod: 0s\n"+k.lb, 1)
			registerMemberType()
			member := func(name string) *memberCloud {
				ip := map[string]string{"ma": "203.0.113.91", "mb": "203.0.113.92"}[name]
				v, ok := memberClouds.Load(ip)
				if !ok {
					t.Fatalf("the membertest backend %s was not built", name)
				}
				return v.(*memberCloud) //nolint:forcetypeassert // only memberClouds are stored.
			}
			s := service("web", nil)
			if k.class != "" {
				s.Spec.LoadBalancerClass = &k.class
			}
			s.Annotations = k.ann
			var objs []runtime.Object
			if k.restarted {
				s.Annotations = maps.Clone(k.ann)
				s.Annotations[string(annotation.LoadBalancerBackends)] = "ma"
				s.Annotations[string(annotation.LoadBalancerServedBy)] = "ma"
				s.Finalizers = []string{Finalizer}
				s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "203.0.113.91"}}
				objs = append(objs, s)
			}
			e := startEnv(t, envOptions{doc: doc, classless: true, versioned: true, reloadable: true,
				nodeQuiet: 10 * time.Millisecond, nodeMax: 50 * time.Millisecond,
				wrap: func(h *hookedCloud) Cloud { return routerTargets{h} },
			}, objs...)
			if !k.restarted {
				e.create(t, s)
			}
			eventually(t, "web addressed", addressed(e, t, "web"))
			uid := string(e.get(t, "web").UID)
			served := strings.Join(k.kept, ",")
			eventually(t, "web served by "+served, func() error {
				if got := e.get(t, "web").Annotations[string(annotation.LoadBalancerServedBy)]; got != served {
					return fmt.Errorf("served by %q", got)
				}
				return nil
			})

			if k.move != nil {
				k.move(t, e, member("mb"))
			}
			eventually(t, "the move failing", func() error {
				if hasEvent(e.events(t, "web"), reasonSyncFailed) == "" {
					return fmt.Errorf("no %s event yet: %v", reasonSyncFailed, e.events(t, "web"))
				}
				return nil
			})
			addNode(t, e)
			for _, b := range k.kept {
				eventually(t, b+"'s kept load balancer with worker-1", func() error { return membersAre(member(b), uid, "worker-0", "worker-1")() })
			}
			if err := e.client.CoreV1().Nodes().Delete(context.Background(), "worker-1", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			for _, b := range k.kept {
				eventually(t, b+"'s kept load balancer without worker-1", func() error { return membersAre(member(b), uid, "worker-0")() })
			}
			if got := e.get(t, "web").Annotations[string(annotation.LoadBalancerServedBy)]; got != served {
				t.Errorf("served by %q while the move fails, want %q", got, served)
			}
		})
	}
}
