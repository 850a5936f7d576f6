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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/metrics/legacyregistry"

	utilt "github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
)

// gate holds, once armed, the first call that passes it until release.
type gate struct {
	mu      sync.Mutex
	armed   bool
	entered chan struct{}
	release chan struct{}
}

func newGate(armed bool) *gate {
	return &gate{armed: armed, entered: make(chan struct{}, 1), release: make(chan struct{})}
}

func (g *gate) arm() {
	g.mu.Lock()
	g.armed = true
	g.mu.Unlock()
}

// pass returns at once unless the gate is armed; then it disarms it,
// signals entered and waits for release.
func (g *gate) pass() {
	g.mu.Lock()
	hold := g.armed
	g.armed = false
	g.mu.Unlock()
	if hold {
		g.entered <- struct{}{}
		<-g.release
	}
}

// holdingTargets is the router with its Targeter whose next
// UpdateLoadBalancer, once armed, is held until release.
type holdingTargets struct {
	routerTargets
	*gate
}

func (h *holdingTargets) UpdateLoadBalancer(ctx context.Context, clusterName string, svc *corev1.Service, nodes []*corev1.Node) error {
	h.pass()
	return h.routerTargets.UpdateLoadBalancer(ctx, clusterName, svc, nodes)
}

// TestNodeAddedDuringUpdateUpdatesTheNLBOnce: a classed IP-target NLB; a
// node excluded starts an UpdateLoadBalancer, held; meanwhile a node
// joins. Once the held call returns, the joined node must reach the NLB
// with one more targets-only update, not one from the controller's requeue
// and another from the router's stale-list re-sync: from the backend's
// verified view the two changes cost exactly two cloud calls (the held
// one's DeregisterTargets, worker-2's RegisterTargets); an update made
// twice, or one that read the NLB again, costs more. The same for a
// classless Service the controller serves: the router's stale-list check
// re-synced it too (a third update), until the controller's calls told
// the router it queues the Service itself (router.RequeuesOnNodeChange).
func TestNodeAddedDuringUpdateUpdatesTheNLBOnce(t *testing.T) {
	t.Run("classed", func(t *testing.T) {
		nodeAddedDuringUpdate(t, awsConfig, false, utilt.NewService("web", utilt.WithClass(awsIPClass)))
	})
	t.Run("classless", func(t *testing.T) {
		doc := strings.Replace(awsConfig, "loadBalancer:\n", "loadBalancer:\n  defaultBackend: aws\n", 1)
		nodeAddedDuringUpdate(t, doc, true, utilt.NewService("web",
			utilt.WithAnnotation("service.beta.kubernetes.io/aws-load-balancer-nlb-target-type", "ip")))
	})
}

func nodeAddedDuringUpdate(t *testing.T, doc string, classless bool, svc *corev1.Service) {
	h := &holdingTargets{gate: newGate(false)}
	f, vpcID := runAWSFake(t)
	e := startEnv(t, envOptions{doc: fmt.Sprintf(doc, f.URL, vpcID), classless: classless, nodeQuiet: 10 * time.Millisecond, nodeMax: 50 * time.Millisecond,
		wrap: func(hc *hookedCloud) Cloud { h.routerTargets = routerTargets{hc}; return h }})
	nodes := e.client.CoreV1().Nodes()
	n1 := utilt.NewNode("worker-1", utilt.WithProviderID("baremetal://worker-1"), utilt.WithInternalIP("10.0.0.11"))
	if _, err := nodes.Create(context.Background(), n1, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.create(t, svc)
	targets := func(want ...string) func() error {
		return func() error {
			if got := ipTargets(f); !slices.Equal(got, want) {
				return fmt.Errorf("IP targets %v, want %v", got, want)
			}
			return nil
		}
	}
	waitFor(t, time.Minute, "both nodes targeted", targets("10.0.0.10", "10.0.0.11"))
	settle := func() int {
		last, since := f.TotalCalls(), time.Now()
		waitFor(t, 30*time.Second, "the calls settled", func() error {
			if n := f.TotalCalls(); n != last {
				last, since = n, time.Now()
			}
			if time.Since(since) < time.Second {
				return fmt.Errorf("still moving")
			}
			return nil
		})
		return last
	}
	settle()

	h.arm()
	n1.Labels[corev1.LabelNodeExcludeBalancers] = "true"
	if _, err := nodes.Update(context.Background(), n1, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	receive(t, h.entered, "the update excluding worker-1")
	if _, err := nodes.Create(context.Background(), utilt.NewNode("worker-2", utilt.WithProviderID("baremetal://worker-2"), utilt.WithInternalIP("10.0.0.12")), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The joined node is in the lister before the held call returns.
	waitFor(t, 30*time.Second, "worker-2 listed", func() error {
		if _, err := e.ctrl.nodes.Get("worker-2"); err != nil {
			return err
		}
		return nil
	})
	before, writes, updates := f.TotalCalls(), f.Calls("RegisterTargets")+f.Calls("DeregisterTargets"), backendUpdates(t)
	close(h.release)
	waitFor(t, 30*time.Second, "worker-1 out, worker-2 in", targets("10.0.0.10", "10.0.0.12"))
	if got := settle() - before; got != 2 {
		t.Errorf("%d cloud calls after the held update was released, want 2: its DeregisterTargets and worker-2's RegisterTargets", got)
	}
	if got := f.Calls("RegisterTargets") + f.Calls("DeregisterTargets") - writes; got != 2 {
		t.Errorf("%d target writes, want 2", got)
	}
	// A second update with nothing left to change costs no cloud call from
	// the verified view: the router's own count shows it.
	if got := backendUpdates(t) - updates; got != 2 {
		t.Errorf("the router called UpdateLoadBalancer %v times after the held one was released, want 2: the held one and one for worker-2", got)
	}
}

// backendUpdates is the router's count of its UpdateLoadBalancer calls to
// backends (multicloud_ccm_backend_requests_total), whatever their result.
func backendUpdates(t *testing.T) float64 {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, f := range families {
		if f.GetName() != "multicloud_ccm_backend_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "operation" && l.GetValue() == "UpdateLoadBalancer" {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return n
}
