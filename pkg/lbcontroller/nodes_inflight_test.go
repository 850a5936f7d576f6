package lbcontroller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	utilt "github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
)

// slowCloud is the router behind a slow cloud: once armed, the next
// UpdateLoadBalancer reports on entered and waits for release before it
// goes through. It records the nodes handed to every update, and reports
// on compared when the controller compares targets (its Targeter, which
// targets every node handed, as without one) with the node named by
// leaving left out while an update is held: that is the flush of a
// node change made during the call.
type slowCloud struct {
	*hookedCloud
	mu       sync.Mutex
	armed    bool
	holding  bool
	leaving  string
	handed   [][]string
	entered  chan []string
	compared chan struct{}
	release  chan struct{}
}

func newSlowCloud() *slowCloud {
	return &slowCloud{entered: make(chan []string, 1), compared: make(chan struct{}, 1), release: make(chan struct{})}
}

func (s *slowCloud) UpdateLoadBalancer(ctx context.Context, clusterName string, svc *corev1.Service, nodes []*corev1.Node) error {
	names := nodeNames(nodes)
	s.mu.Lock()
	hold := s.armed
	s.armed, s.holding = false, hold
	s.mu.Unlock()
	if hold {
		s.entered <- names
		<-s.release
		s.mu.Lock()
		s.holding = false
		s.mu.Unlock()
	}
	err := s.hookedCloud.UpdateLoadBalancer(ctx, clusterName, svc, nodes)
	if err == nil {
		s.mu.Lock()
		s.handed = append(s.handed, names)
		s.mu.Unlock()
	}
	return err
}

func (s *slowCloud) LoadBalancerTargets(_ *corev1.Service, nodes []*corev1.Node) []*corev1.Node {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.holding && !slices.Contains(nodeNames(nodes), s.leaving) {
		select {
		case s.compared <- struct{}{}:
		default:
		}
	}
	return nodes
}

// lastHanded is the node list of the last update that went through.
func (s *slowCloud) lastHanded() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.handed) == 0 {
		return nil
	}
	return s.handed[len(s.handed)-1]
}

func nodeNames(nodes []*corev1.Node) []string {
	out := make([]string, 0, len(nodes))
	for _, n := range nodes {
		out = append(out, n.Name)
	}
	slices.Sort(out)
	return out
}

// receive waits for one value on ch, failing the test after a generous
// bound.
func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// TestNodeExcludedDuringUpdateReachesTheLoadBalancer: a node joins, and
// while the UpdateLoadBalancer adding it is in flight (a slow cloud) the
// node is excluded (node.kubernetes.io/exclude-from-external-load-balancers)
// and the node batch is flushed. The exclusion still reaches the load
// balancer, with no repair pass (resync period 0): an update handed only
// the nodes left follows the slow one. Before, the flush compared the
// nodes with the targets recorded before the slow call (the same set),
// queued nothing, and the slow call then recorded the node it added: the
// load balancer kept the excluded node.
func TestNodeExcludedDuringUpdateReachesTheLoadBalancer(t *testing.T) {
	slow := newSlowCloud()
	slow.leaving = "worker-1"
	e := startEnv(t, envOptions{doc: cloudConfig, nodeQuiet: 10 * time.Millisecond, nodeMax: 50 * time.Millisecond,
		wrap: func(h *hookedCloud) Cloud { slow.hookedCloud = h; return slow }}, service("web", ptrTo(ourClass)))
	eventually(t, "the Service's address", addressed(e, t, "web"))

	slow.mu.Lock()
	slow.armed = true
	slow.mu.Unlock()
	n := utilt.NewNode("worker-1", utilt.WithProviderID("baremetal://worker-1"), utilt.WithInternalIP("10.0.0.11"))
	if _, err := e.client.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := receive(t, slow.entered, "the update adding worker-1"); !slices.Equal(got, []string{"worker-0", "worker-1"}) {
		t.Fatalf("the held update was handed %v, want worker-0 and worker-1", got)
	}
	n.Labels[corev1.LabelNodeExcludeBalancers] = "true"
	if _, err := e.client.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	receive(t, slow.compared, "the flush of the exclusion during the held update")
	close(slow.release)

	eventually(t, "an update without the excluded node", func() error {
		if got := slow.lastHanded(); !slices.Equal(got, []string{"worker-0"}) {
			return fmt.Errorf("the last update was handed %v", got)
		}
		return nil
	})
	if e.ctrl.opts.ResyncPeriod != 0 {
		t.Fatal(errors.New("the test must run without repair passes"))
	}
}
