package lbcontroller

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	servicehelper "k8s.io/cloud-provider/service/helpers"

	utilt "github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
)

// bigClasslessConfig serves Services without a class from a /20.
const bigClasslessConfig = `apiVersion: multicloud-ccm.io/v1alpha1
kind: CloudConfig
clusterID: test
loadBalancer: {defaultBackend: metal}
backends:
- name: metal
  type: baremetal
  baremetal:
    inventory: [{name: worker-0, addresses: [{type: InternalIP, address: 10.0.0.10}]}]
    addressPools: [{name: lan, addresses: ["10.200.0.0/20"]}]
`

// syncBuffer is a log sink the controller's goroutines write to.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lines returns the lines logged so far.
func (b *syncBuffer) lines() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := strings.TrimSpace(b.buf.String())
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// countingCloud counts UpdateLoadBalancer calls per Service and, with
// scheme set, is a Targeter whose load balancers target only the nodes of
// that providerID scheme.
type countingCloud struct {
	*hookedCloud
	scheme  string
	mu      sync.Mutex
	updates map[string]int
}

func (c *countingCloud) UpdateLoadBalancer(ctx context.Context, clusterName string, svc *corev1.Service, nodes []*corev1.Node) error {
	c.mu.Lock()
	c.updates[keyOf(svc)]++
	c.mu.Unlock()
	return c.hookedCloud.UpdateLoadBalancer(ctx, clusterName, svc, nodes)
}

func (c *countingCloud) updatesOf(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.updates[key]
}

// targetingCloud is a countingCloud that is a Targeter.
type targetingCloud struct{ *countingCloud }

func (c targetingCloud) LoadBalancerTargets(_ *corev1.Service, nodes []*corev1.Node) []*corev1.Node {
	var out []*corev1.Node
	for _, n := range nodes {
		if strings.HasPrefix(n.Spec.ProviderID, c.scheme) {
			out = append(out, n)
		}
	}
	return out
}

// countEvents counts the Service's events of reason, repeats included.
func (e *env) countEvents(t *testing.T, name, reason string) int {
	t.Helper()
	list, err := e.client.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ev := range list.Items {
		if ev.InvolvedObject.Name == name && ev.Reason == reason {
			n += int(max(ev.Count, 1))
		}
	}
	return n
}

func manyServices(n int) []runtime.Object {
	objs := make([]runtime.Object, 0, n)
	for i := range n {
		objs = append(objs, service(fmt.Sprintf("s%02d", i), nil))
	}
	return objs
}

// churn registers nodes prefix-0..n-1 without a providerID, gives them one
// of scheme, deletes them and registers them again with it: four node
// changes each, as a node deleted and registered again makes.
func churn(t *testing.T, e *env, prefix string, n int, scheme string) {
	t.Helper()
	nodes := e.client.CoreV1().Nodes()
	ctx := context.Background()
	for i := range n {
		name := fmt.Sprintf("%s-%d", prefix, i)
		node := utilt.NewNode(name, utilt.WithInternalIP(fmt.Sprintf("10.0.1.%d", i+1)))
		if _, err := nodes.Create(ctx, node, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		node.Spec.ProviderID = scheme + name
		if _, err := nodes.Update(ctx, node, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := nodes.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		node.ResourceVersion = ""
		if _, err := nodes.Create(ctx, node, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// settled waits until the controller's state and the cloud's calls stop
// moving for two batch windows.
func settled(t *testing.T, cc *countingCloud, quiet time.Duration) {
	t.Helper()
	last, since := -1, time.Now()
	waitFor(t, 30*time.Second, "the node batch applied", func() error {
		cc.mu.Lock()
		n := 0
		for _, v := range cc.updates {
			n += v
		}
		cc.mu.Unlock()
		if n != last {
			last, since = n, time.Now()
		}
		if time.Since(since) < 3*quiet {
			return fmt.Errorf("%d updates, still moving", n)
		}
		return nil
	})
}

// TestNodeChurnCoalesced: 10 nodes churned (each registered, given its
// providerID, deleted and registered again: 40 node changes) within one
// batch cost each of 20 Services served by our controller (classless, as
// by default) one UpdateLoadBalancer, one UpdatedLoadBalancer event and
// no log line at the default verbosity.
func TestNodeChurnCoalesced(t *testing.T) {
	const services, quiet = 20, 2 * time.Second
	var cc *countingCloud
	logs := &syncBuffer{}
	// The quiet window is wide, so that a loaded machine (CI under -race)
	// pausing between two of the churn's writes does not split its batch.
	e := startEnv(t, envOptions{doc: bigClasslessConfig, classless: true, log: logs, nodeQuiet: quiet, nodeMax: 30 * time.Second,
		wrap: func(h *hookedCloud) Cloud {
			cc = &countingCloud{hookedCloud: h, updates: map[string]int{}}
			return cc
		}}, manyServices(services)...)
	for i := range services {
		eventually(t, "every Service addressed", addressed(e, t, fmt.Sprintf("s%02d", i)))
	}
	settled(t, cc, quiet)
	before := len(logs.lines())

	churn(t, e, "churn", 10, "baremetal://")
	settled(t, cc, quiet)
	for i := range services {
		name := fmt.Sprintf("s%02d", i)
		if got := cc.updatesOf("default/" + name); got != 1 {
			t.Errorf("%s: %d UpdateLoadBalancer calls for one batch of node changes, want 1", name, got)
		}
		eventually(t, "the UpdatedLoadBalancer event", func() error {
			if got := e.countEvents(t, name, "UpdatedLoadBalancer"); got != 1 {
				return fmt.Errorf("%s: %d UpdatedLoadBalancer events, want 1", name, got)
			}
			return nil
		})
	}
	if lines := logs.lines()[before:]; len(lines) > 0 {
		t.Errorf("the churn logged %d lines at the default verbosity:\n%s", len(lines), strings.Join(lines, "\n"))
	}
}

// TestNodeChurnOnlyWhereTargetsChange: with a cloud that says which nodes
// a Service's load balancer targets (the router, by its backends), a churn
// of nodes none of them targets updates no load balancer and records no
// event.
func TestNodeChurnOnlyWhereTargetsChange(t *testing.T) {
	const services, quiet = 5, 300 * time.Millisecond
	var cc *countingCloud
	e := startEnv(t, envOptions{doc: bigClasslessConfig, classless: true, nodeQuiet: quiet, nodeMax: 5 * time.Second,
		wrap: func(h *hookedCloud) Cloud {
			cc = &countingCloud{hookedCloud: h, scheme: "baremetal://", updates: map[string]int{}}
			return targetingCloud{cc}
		}}, manyServices(services)...)
	for i := range services {
		eventually(t, "every Service addressed", addressed(e, t, fmt.Sprintf("s%02d", i)))
	}
	settled(t, cc, quiet)
	churn(t, e, "aws", 10, "aws:///eu-west-1a/i-")
	settled(t, cc, quiet)
	for i := range services {
		name := fmt.Sprintf("s%02d", i)
		if got := cc.updatesOf("default/" + name); got != 0 {
			t.Errorf("%s: %d UpdateLoadBalancer calls for nodes its load balancer does not target", name, got)
		}
		if got := e.countEvents(t, name, "UpdatedLoadBalancer"); got != 0 {
			t.Errorf("%s: %d UpdatedLoadBalancer events", name, got)
		}
	}
	// A node it targets still updates each once.
	churn(t, e, "metal", 1, "baremetal://")
	settled(t, cc, quiet)
	for i := range services {
		if got := cc.updatesOf(fmt.Sprintf("default/s%02d", i)); got != 1 {
			t.Errorf("s%02d: %d updates after a targeted node joined, want 1", i, got)
		}
	}
}

// TestRestartRechecksSilently: a new controller (a restart, or a new
// leader) over Services its predecessor served re-checks each through the
// cloud, under one start-up pass, and writes nothing, records no event and
// logs one summary line at the default verbosity.
func TestRestartRechecksSilently(t *testing.T) {
	const services = 20
	first := startEnv(t, envOptions{doc: bigClasslessConfig, classless: true}, manyServices(services)...)
	for i := range services {
		eventually(t, "every Service addressed", addressed(first, t, fmt.Sprintf("s%02d", i)))
	}
	list, err := first.client.CoreV1().Services("default").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	objs := make([]runtime.Object, 0, len(list.Items))
	for i := range list.Items {
		objs = append(objs, &list.Items[i])
	}
	logs := &syncBuffer{}
	second := startEnv(t, envOptions{doc: bigClasslessConfig, classless: true, log: logs}, objs...)
	waitFor(t, 30*time.Second, "the start-up pass's summary", func() error {
		for _, l := range logs.lines() {
			if strings.Contains(l, "Checked the load balancers of the Services served") {
				return nil
			}
		}
		return fmt.Errorf("log: %v", logs.lines())
	})
	if got := second.cloud.ensures.Load(); got != services {
		t.Errorf("%d EnsureLoadBalancer calls at start, want one per Service (%d)", got, services)
	}
	time.Sleep(300 * time.Millisecond) // anything in flight after the pass
	if n := second.serviceWrites(); n != 0 {
		t.Errorf("the start-up re-check wrote %d times: %v", n, second.client.Actions())
	}
	for i := range services {
		if evs := second.events(t, fmt.Sprintf("s%02d", i)); len(evs) > 0 {
			t.Errorf("s%02d: events %v at the re-check", i, evs)
		}
	}
	lines := logs.lines()
	var other []string
	for _, l := range lines {
		if !strings.Contains(l, "Starting") && !strings.Contains(l, "Waiting for caches") && !strings.Contains(l, "Caches are synced") {
			other = append(other, l)
		}
	}
	if len(other) != 1 || !strings.Contains(other[0], `pass="start-up" services=20 changed=0 failed=0 unfinished=0`) {
		t.Errorf("want one summary line (start-up, 20 Services, none changed), got:\n%s", strings.Join(other, "\n"))
	}
}

// TestAdoptedFromUpstream: a classless Service upstream's service
// controller served (its finalizer service.kubernetes.io/load-balancer-cleanup
// and an address, no record of ours) is served by our controller, which
// keeps its address, and its deletion is cleaned up by ours: the finalizer
// is removed.
func TestAdoptedFromUpstream(t *testing.T) {
	old := service("old", nil)
	old.Finalizers = []string{servicehelper.LoadBalancerCleanupFinalizer}
	old.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.5"}}
	e := start(t, true, old)
	eventually(t, "the Service served", addressed(e, t, "old"))
	if got := ingress(e.get(t, "old")); got != "192.0.2.5" {
		t.Errorf("the adopted Service's address is %s, want 192.0.2.5 (kept)", got)
	}
	if err := e.client.CoreV1().Services("default").Delete(context.Background(), "old", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the Service gone (finalizer removed by us)", func() error {
		_, err := e.client.CoreV1().Services("default").Get(context.Background(), "old", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return errors.Join(errors.New("still there"), err)
	})
	if held := e.cloud.held(); len(held) > 0 {
		t.Errorf("load balancers left after the delete: %v", held)
	}
}
