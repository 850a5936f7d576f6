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

	utilt "github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
)

// holdingPrepare is the router with its Targeter whose next
// PrepareLoadBalancer, once armed, is held until release: the
// controller's first sync has listed the nodes, and has not yet written
// the router's record on the Service.
type holdingPrepare struct {
	routerTargets
	*gate
}

func (h *holdingPrepare) PrepareLoadBalancer(svc *corev1.Service) map[string]*string {
	h.pass()
	return h.routerTargets.PrepareLoadBalancer(svc)
}

// TestAddressChangeBeforeTheRecordReachesTheNLB: a node's address changes
// after the controller's first sync of an IP-target NLB listed the nodes
// and before the router's informer saw the record that sync writes. The
// router's address re-sync queues only Services whose record it sees (its
// first sync may be in flight); the controller counted no change
// (addresses are not a change of the set of targets) and the router does
// not compare the nodes of its calls (RequeuesOnNodeChange): the NLB kept
// the old address for ever (TestProbeAddressChangeDuringFirstEnsure
// failed so under load, its Service informer lagging the controller's
// write). The controller now updates the load balancer of a Service
// whose call was in flight while an address changed.
func TestAddressChangeBeforeTheRecordReachesTheNLB(t *testing.T) {
	t.Run("classless", func(t *testing.T) {
		doc := strings.Replace(awsConfig, "loadBalancer:\n", "loadBalancer:\n  defaultBackend: aws\n", 1)
		addressChangeBeforeRecord(t, doc, true, utilt.NewService("web",
			utilt.WithAnnotation("service.beta.kubernetes.io/aws-load-balancer-nlb-target-type", "ip")))
	})
	t.Run("classed", func(t *testing.T) {
		addressChangeBeforeRecord(t, awsConfig, false, utilt.NewService("web", utilt.WithClass(awsIPClass)))
	})
}

func addressChangeBeforeRecord(t *testing.T, doc string, classless bool, svc *corev1.Service) {
	h := &holdingPrepare{gate: newGate(true)}
	addressChangeWhileHeld(t, heldCall{doc: doc, classless: classless, versioned: true, svc: svc, what: "the first PrepareLoadBalancer", gate: h.gate,
		wrap: func(rt routerTargets) Cloud { h.routerTargets = rt; return h }})
}

// heldCall is a call of the controller's first sync of svc, held by gate
// (wrap puts it around the router) while worker-1's address changes.
type heldCall struct {
	doc                  string
	classless, versioned bool
	svc                  *corev1.Service
	what                 string
	gate                 *gate
	wrap                 func(routerTargets) Cloud
	settle               time.Duration // waited once the new address is listed, before release
}

// addressChangeWhileHeld changes worker-1's address while the call is
// held, releases it, and wants the IP-target NLB to register the new
// address.
func addressChangeWhileHeld(t *testing.T, c heldCall) {
	f, vpcID := runAWSFake(t)
	e := startEnv(t, envOptions{doc: fmt.Sprintf(c.doc, f.URL, vpcID), classless: c.classless, versioned: c.versioned,
		nodeQuiet: 10 * time.Millisecond, nodeMax: 50 * time.Millisecond,
		wrap: func(hc *hookedCloud) Cloud { return c.wrap(routerTargets{hc}) }})
	nodes := e.client.CoreV1().Nodes()
	n1 := utilt.NewNode("worker-1", utilt.WithProviderID("baremetal://worker-1"), utilt.WithInternalIP("10.0.0.11"))
	n1, err := nodes.Create(context.Background(), n1, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "worker-1 listed", func() error {
		_, err := e.ctrl.nodes.Get("worker-1")
		return err
	})
	e.create(t, c.svc)
	receive(t, c.gate.entered, c.what)
	n1 = n1.DeepCopy()
	n1.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.21"}}
	if _, err := nodes.UpdateStatus(context.Background(), n1, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "worker-1's new address listed", func() error {
		n, err := e.ctrl.nodes.Get("worker-1")
		if err != nil {
			return err
		}
		if len(n.Status.Addresses) == 0 || n.Status.Addresses[0].Address != "10.0.0.21" {
			return fmt.Errorf("addresses %v", n.Status.Addresses)
		}
		return nil
	})
	time.Sleep(c.settle)
	close(c.gate.release)
	want := []string{"10.0.0.10", "10.0.0.21"}
	waitFor(t, 20*time.Second, "worker-1's new address registered", func() error {
		if got := ipTargets(f); !slices.Equal(got, want) {
			return fmt.Errorf("IP targets %v, want %v; status %v", got, want, e.get(t, "web").Status.LoadBalancer.Ingress)
		}
		return nil
	})
}
