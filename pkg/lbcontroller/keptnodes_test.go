package lbcontroller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	utilt "github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
)

// The load balancers a Service keeps outside its targets (one draining
// after a move, one kept while the backend it moves to refuses it) still
// serve: they must target the nodes as the Service's targets do. The
// OpenStack planswitch worlds (seeds 1796239464041781550,
// 1796240106670247103, 1796240686284718747) found both keeping the nodes
// of before the switch.

// keptConfig: two membertest backends (their load balancers take every
// node with an address and record the nodes each call handed them) and
// bare metal, whose pool cannot give 0.0.0.0.
const keptConfig = `apiVersion: multicloud-ccm.io/v1alpha1
kind: CloudConfig
clusterID: test
loadBalancer:
  drainPeriod: 0s
backends:
- name: ma
  type: ` + memberType + `
  ` + memberType + `: {ip: %[1]s}
- name: mb
  type: ` + memberType + `
  ` + memberType + `: {ip: %[2]s}
- name: metal
  type: baremetal
  baremetal:
    inventory: [{name: worker-0, addresses: [{type: InternalIP, address: 10.0.0.10}]}]
    addressPools: [{name: lan, addresses: ["192.0.2.0/28"]}]
`

// startKept starts the controller over keptConfig with the router's
// Targeter, node batches of quiet and max, and returns the membertest
// backends built for ipA and ipB.
func startKept(t *testing.T, ipA, ipB string, quiet, maxWait time.Duration) (*env, *memberCloud, *memberCloud) {
	t.Helper()
	registerMemberType()
	e := startEnv(t, envOptions{
		doc: fmt.Sprintf(keptConfig, ipA, ipB), classless: true, versioned: true,
		nodeQuiet: quiet, nodeMax: maxWait,
		wrap: func(h *hookedCloud) Cloud { return routerTargets{h} },
	})
	member := func(ip string) *memberCloud {
		v, ok := memberClouds.Load(ip)
		if !ok {
			t.Fatalf("the membertest backend on %s was not built", ip)
		}
		return v.(*memberCloud) //nolint:forcetypeassert // only memberClouds are stored.
	}
	return e, member(ipA), member(ipB)
}

// addNode creates worker-1 (an address: a member) and waits until the
// controller's informer lists it.
func addNode(t *testing.T, e *env) {
	t.Helper()
	n := utilt.NewNode("worker-1", utilt.WithProviderID("baremetal://worker-1"), utilt.WithInternalIP("10.0.0.11"))
	if _, err := e.client.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "worker-1 in the informer", func() error {
		_, err := e.factory.Core().V1().Nodes().Lister().Get("worker-1")
		return err
	})
}

func membersAre(m *memberCloud, uid string, want ...string) func() error {
	return func() error {
		if got := m.membersOf(uid); !slices.Equal(got, want) {
			return fmt.Errorf("members %v, want %v", got, want)
		}
		return nil
	}
}

// TestDrainingLoadBalancerGetsTheNodesOfItsSync: a Service on ma moves
// to mb with a drain of an hour, after worker-1 joined and before any node
// sync ran (the node batch waits a minute: the move's sync alone hands the
// nodes, as the first sync after a restart does). mb's load balancer gets
// both nodes; ma's, draining, must too: it still serves. Before, the sync
// that started the drain handed it nothing, the controller recorded both
// backends as targeting both nodes, and no node sync updated it: it kept
// worker-0 alone until its drain ended.
func TestDrainingLoadBalancerGetsTheNodesOfItsSync(t *testing.T) {
	e, ma, mb := startKept(t, "203.0.113.81", "203.0.113.82", time.Minute, time.Minute)
	webOn(t, e, "ma", "1h")
	uid := string(e.get(t, "web").UID)
	eventually(t, "ma's load balancer with worker-0", membersAre(ma, uid, "worker-0"))

	addNode(t, e)
	e.moveTo(t, "web", "mb")
	eventually(t, "ma draining, mb serving", func() error {
		s := e.get(t, "web")
		if !strings.HasPrefix(drainingOf(s), "ma=") || s.Annotations[string(annotation.LoadBalancerServedBy)] != "mb" {
			return fmt.Errorf("%s; events %v", state(s), e.events(t, "web"))
		}
		return nil
	})
	eventually(t, "mb's load balancer with both nodes", membersAre(mb, uid, "worker-0", "worker-1"))
	eventually(t, "ma's draining load balancer with both nodes", membersAre(ma, uid, "worker-0", "worker-1"))
}

// TestKeptLoadBalancerGetsTheNodesOfItsSync: a Service on ma moves to
// metal asking 0.0.0.0, which metal refuses: its sync fails, and is
// retried, while ma's load balancer is kept (make before break) and
// serves. worker-1 joining, then leaving, must reach ma's load balancer,
// with one UpdateLoadBalancer per change of its targets, not one per
// retry of the failing sync. Before, every node sync of the Service was
// its failing full sync, which hands nodes only to its targets (metal):
// ma's load balancer never got worker-1.
func TestKeptLoadBalancerGetsTheNodesOfItsSync(t *testing.T) {
	e, ma, _ := startKept(t, "203.0.113.83", "203.0.113.84", 10*time.Millisecond, 50*time.Millisecond)
	webOn(t, e, "ma", "0")
	uid := string(e.get(t, "web").UID)
	eventually(t, "ma's load balancer with worker-0", membersAre(ma, uid, "worker-0"))

	e.edit(t, "web", map[string]*string{
		string(annotation.LoadBalancerBackend): ptrTo("metal"),
		string(annotation.LoadBalancerIPs):     ptrTo("0.0.0.0"),
	})
	eventually(t, "metal refusing", func() error {
		if hasEvent(e.events(t, "web"), reasonSyncFailed) == "" {
			return fmt.Errorf("no %s event yet: %v", reasonSyncFailed, e.events(t, "web"))
		}
		return nil
	})
	before := e.cloud.updates.Load()

	addNode(t, e)
	eventually(t, "ma's kept load balancer with worker-1", membersAre(ma, uid, "worker-0", "worker-1"))
	time.Sleep(time.Second) // the failing sync is retried every 100 ms at most
	if got := e.cloud.updates.Load() - before; got != 1 {
		t.Errorf("%d UpdateLoadBalancer calls for worker-1 joining, want 1", got)
	}

	if err := e.client.CoreV1().Nodes().Delete(context.Background(), "worker-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "ma's kept load balancer without worker-1", membersAre(ma, uid, "worker-0"))
	time.Sleep(time.Second)
	if got := e.cloud.updates.Load() - before; got != 2 {
		t.Errorf("%d UpdateLoadBalancer calls for worker-1 joining and leaving, want 2", got)
	}
	if s := e.get(t, "web"); s.Annotations[string(annotation.LoadBalancerServedBy)] != "ma" || ingresses(s) == "" {
		t.Errorf("the Service while metal refuses: served by %q, %s; want ma's address kept",
			s.Annotations[string(annotation.LoadBalancerServedBy)], state(s))
	}
}
