package scale

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/multicloud-ccm/multicloud-ccm/internal/awsfake"
	_ "github.com/multicloud-ccm/multicloud-ccm/pkg/backends/aws"       // type aws.
	_ "github.com/multicloud-ccm/multicloud-ccm/pkg/backends/baremetal" // type baremetal.
	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router"
)

// The churn loop, at unit size. Measured through the binary (docs/scale.md):
// replacing 10 of 100 bare-metal nodes with 1,000 Services logged 5,897
// "Re-targeted load balancer after a node address change" lines, replacing
// 100 of 1,000 nodes tens of thousands; steady state is silent before and
// after. The router's node-address watcher (pkg/router/nodesync.go,
// startAddressResync's UpdateFunc and addressResync.enqueueFor) queues
// every Service whose backend "can target" the node on any change of
// status.addresses — and the cloud node controller writes the addresses of
// every new node once, right after it sets the providerID, so every
// (re-)registered node re-targets every Service. backend.canTarget falls
// back to owns(node) for a backend without backends.NodeTargeter: bare
// metal owns its nodes, so each of its Services is re-targeted although
// bare metal's UpdateLoadBalancer ignores the nodes (its load balancers
// target no node). On AWS every NLB that can target the node was
// re-targeted, though instance targets are registered by instance ID:
// the watcher now asks the backend whether it reaches the node by address
// (backends.AddressTargeter).

// TestStaleListCheckIgnoresBareMetal hands a bare-metal load balancer's
// update the node list a node sync took before node-1 was initialised
// (during a churn, the next node's initialisation lands between a sync's
// list and the router's check: at 1,000 nodes every "stale" line read
// handed=999 current=999). pkg/router/nodesync.go requeueIfStale compares
// backend.targetable of both lists and queues a re-sync; bare metal
// ignores the nodes, so nothing is stale.
func TestStaleListCheckIgnoresBareMetal(t *testing.T) {
	stale := countLogged(t, "Load balancer was handed a stale node list", "")
	h := newRouterHarness(t, 1)
	svc, err := h.factory.Core().V1().Services().Lister().Services(svcNS).Get("s00")
	if err != nil {
		t.Fatal(err)
	}
	node0, err := h.factory.Core().V1().Nodes().Lister().Get("node-0")
	if err != nil {
		t.Fatal(err)
	}
	// node-1 as listed before the node controller set its providerID.
	node1 := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}
	if err := h.r.UpdateLoadBalancer(context.Background(), "scale", svc, []*corev1.Node{node0, node1}); err != nil {
		t.Fatal(err)
	}
	if got := stale.Load(); got != 0 {
		t.Fatalf("a bare-metal load balancer handed a list older than one node's initialisation was queued for %d stale-list re-syncs, want 0 (bare metal targets no node)", got)
	}
}

// TestNodeAddressesRetargetNoInstanceNLB is the churn loop on AWS
// (docs/scale.md: a 10-node churn of 100 nodes with 1,000 Services cost
// 1,004 re-targets and 9,038 ELBv2/EC2 reads, 1,032 and 9,295 at 1,000
// nodes): every node a churn registers gets its addresses once (none ->
// its addresses, the cloud node controller's second write), and the
// router re-targeted every NLB that can target the node, though instance
// targets are registered by instance ID. Against the AWS backend over
// awsfake: five NLBs with instance targets (the default) are re-targeted
// neither when node-0's addresses arrive nor when an ExternalIP is added;
// one with ip targets is, each time (and registers node-0's address).
func TestNodeAddressesRetargetNoInstanceNLB(t *testing.T) {
	const retargeted = "Re-targeted load balancer after a node address change"
	all := countLogged(t, retargeted, "")
	marker := countLogged(t, retargeted+"\x00ipmarker", "")
	f, err := awsfake.New(region).Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	seeded := f.Seed(awsfake.SeedSpec{ClusterID: clusterID, Instances: 2, NodeSecurityGroup: true})
	t.Setenv("CHURN_AWS_KEY", "AKIDFAKE")
	t.Setenv("CHURN_AWS_SECRET", "fake-secret")
	cfg := fmt.Sprintf(`apiVersion: multicloud-ccm.io/v1alpha1
kind: CloudConfig
clusterID: %s
loadBalancer: {defaultBackend: aws}
backends:
- name: aws
  type: aws
  aws:
    region: %s
    vpc: %s
    endpoints: {ec2: %[4]q, elbv2: %[4]q, sts: %[4]q}
    credentials:
      accessKeyID: {env: CHURN_AWS_KEY}
      secretAccessKey: {env: CHURN_AWS_SECRET}
    rateLimits: {ec2: {qps: -1, qpsWrite: -1}, elbv2: {qps: -1, qpsWrite: -1}}
`, clusterID, region, seeded.VPCID, f.URL)
	nodes := make([]*corev1.Node, len(seeded.Instances))
	for i, in := range seeded.Instances {
		// Registered with its providerID, as EKS's kubelet does; node-1
		// already given its addresses, node-0 not yet.
		nodes[i] = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: in.PrivateDNSName}, Spec: corev1.NodeSpec{ProviderID: fmt.Sprintf("aws:///%s/%s", in.Zone, in.ID)}}
	}
	nodes[1].Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: seeded.Instances[1].PrivateIPs[0]}}
	h := newRouterHarnessFrom(t, cfg, nodes...)
	ctx := context.Background()
	for i := range 5 {
		h.ensure(ctx, t, fmt.Sprintf("s%02d", i))
	}
	h.ensure(ctx, t, "ipmarker", "service.beta.kubernetes.io/aws-load-balancer-nlb-target-type", "ip")
	f.ResetCalls()
	defer func() {
		if t.Failed() {
			t.Logf("re-targets %d (ip-targeted %d), cloud calls %v", all.Load(), marker.Load(), f.CallCounts())
		}
	}()

	// The node controller's PatchNodeStatus at node-0's initialisation.
	node0 := h.setAddresses(ctx, t, nodes[0].Name,
		corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: seeded.Instances[0].PrivateIPs[0]},
		corev1.NodeAddress{Type: corev1.NodeInternalDNS, Address: nodes[0].Name},
		corev1.NodeAddress{Type: corev1.NodeHostName, Address: nodes[0].Name})
	h.waitLogged(t, "the ip-targeted NLB re-targeted", marker, 1)
	// A public address associated: the instance NLBs still do not care;
	// once the ip-targeted one is re-targeted again, every earlier queued
	// re-sync was taken.
	h.setAddresses(ctx, t, nodes[0].Name, append(node0.Status.Addresses,
		corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "203.0.113.10"})...)
	h.waitLogged(t, "the ip-targeted NLB re-targeted again", marker, 2)
	if got := all.Load() - marker.Load(); got != 0 {
		t.Errorf("node-0's address changes re-targeted instance-targeted NLBs %d times, want 0 (instance targets are registered by instance ID)", got)
	}
	var ipTargets string
	for _, tg := range f.TargetGroups() {
		if tg.TargetType == "ip" {
			ipTargets = strings.Join(tg.Targets, ",")
		}
	}
	if !strings.Contains(ipTargets, seeded.Instances[0].PrivateIPs[0]) {
		t.Errorf("the ip-targeted NLB's targets %q lack node-0's address", ipTargets)
	}
	t.Logf("cloud calls for two address changes: %v", f.CallCounts())
}

// setAddresses writes the node's status addresses and returns the node.
func (h *routerHarness) setAddresses(ctx context.Context, t *testing.T, name string, addrs ...corev1.NodeAddress) *corev1.Node {
	t.Helper()
	n, err := h.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Status.Addresses = addrs
	if n, err = h.client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return n
}

// waitLogged waits until n counted at least want lines.
func (h *routerHarness) waitLogged(t *testing.T, what string, n *atomic.Int64, want int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for n.Load() < want {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// routerHarness is the router built from a bare-metal cloud-config over a
// fake API server, with its informers running and services Services
// ensured and addressed.
type routerHarness struct {
	r       *router.Router
	client  kubernetes.Interface
	factory informers.SharedInformerFactory
}

func newRouterHarness(t *testing.T, services int) *routerHarness {
	t.Helper()
	h := newRouterHarnessFrom(t, `apiVersion: multicloud-ccm.io/v1alpha1
kind: CloudConfig
clusterID: scale
loadBalancer: {defaultBackend: metal}
backends:
- name: metal
  type: baremetal
  baremetal:
    addressPools: [{name: lan, addresses: ["10.200.0.0/24"]}]
    inventory:
    - {name: node-0, addresses: [{type: InternalIP, address: 10.1.0.1}]}
    - {name: node-1, addresses: [{type: InternalIP, address: 10.1.0.2}]}
`,
		// node-0 registered and initialised but not yet given its
		// addresses (the node controller's second write); node-1 done.
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-0"}, Spec: corev1.NodeSpec{ProviderID: "baremetal://node-0"}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}, Spec: corev1.NodeSpec{ProviderID: "baremetal://node-1"},
			Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.1.0.2"}}}},
	)
	for i := range services {
		h.ensure(context.Background(), t, fmt.Sprintf("s%02d", i))
	}
	return h
}

// newRouterHarnessFrom builds the router from the cloud-config cfg over a
// fake API server holding nodes, with its informers running.
func newRouterHarnessFrom(t *testing.T, cfgText string, nodes ...*corev1.Node) *routerHarness {
	t.Helper()
	cfg, err := config.Parse([]byte(cfgText), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	r, err := router.NewFromConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	objs := make([]runtime.Object, 0, len(nodes))
	for _, n := range nodes {
		objs = append(objs, n)
	}
	client := fake.NewClientset(objs...)
	h := &routerHarness{r: r, client: client, factory: informers.NewSharedInformerFactory(client, 0)}
	r.Initialize(clientBuilder{client}, ctx.Done())
	r.SetInformers(h.factory)
	h.factory.Start(ctx.Done())
	h.factory.WaitForCacheSync(ctx.Done())
	return h
}

// ensure creates the Service (annotations: name, value, ...), has the
// router ensure its load balancer with the current nodes and writes the
// address into its status, as the service controller does, and waits
// until the informer saw it.
func (h *routerHarness) ensure(ctx context.Context, t *testing.T, name string, annotations ...string) {
	t.Helper()
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: svcNS, Name: name, UID: types.UID("uid-" + name), Annotations: map[string]string{}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Name: "http", Port: 80, NodePort: 30080, Protocol: corev1.ProtocolTCP}}}}
	for i := 0; i+1 < len(annotations); i += 2 {
		svc.Annotations[annotations[i]] = annotations[i+1]
	}
	svc, err := h.client.CoreV1().Services(svcNS).Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h.waitService(t, name, func(*corev1.Service) bool { return true })
	nodes, err := h.factory.Core().V1().Nodes().Lister().List(labels.Everything())
	if err != nil {
		t.Fatal(err)
	}
	status, err := h.r.EnsureLoadBalancer(ctx, "scale", svc, nodes)
	if err != nil {
		t.Fatal(err)
	}
	if len(status.Ingress) == 0 {
		t.Fatalf("Service %s ensured without an address", name)
	}
	cur, err := h.client.CoreV1().Services(svcNS).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Status.LoadBalancer = *status
	if _, err := h.client.CoreV1().Services(svcNS).UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitService(t, name, func(s *corev1.Service) bool { return len(s.Status.LoadBalancer.Ingress) > 0 })
}

func (h *routerHarness) waitService(t *testing.T, name string, ok func(*corev1.Service) bool) {
	t.Helper()
	lister := h.factory.Core().V1().Services().Lister()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if s, err := lister.Services(svcNS).Get(name); err == nil && ok(s) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("the informer never saw Service %s as wanted", name)
}

// countLogged counts the log lines (klog, any verbosity up to 4) that
// contain text (every NUL-separated part of it) and, unless exclude is
// empty, not exclude, until the test ends.
func countLogged(t *testing.T, text, exclude string) *atomic.Int64 {
	t.Helper()
	var n atomic.Int64
	countersMu.Lock()
	counters = append(counters, counter{text: text, exclude: exclude, n: &n})
	countersMu.Unlock()
	// The counting logger is installed once for the process and never
	// cleared: goroutines of an earlier test's router may still log, and
	// swapping klog's logger under them would race.
	installCounting.Do(func() {
		klog.SetLoggerWithOptions(funcr.New(func(prefix, args string) {
			line := prefix + " " + args
			countersMu.Lock()
			defer countersMu.Unlock()
			for _, c := range counters {
				if containsAll(line, strings.Split(c.text, "\x00")) && (c.exclude == "" || !strings.Contains(line, c.exclude)) {
					c.n.Add(1)
				}
			}
		}, funcr.Options{Verbosity: 4}), klog.ContextualLogger(true))
	})
	t.Cleanup(func() {
		countersMu.Lock()
		counters = nil
		countersMu.Unlock()
	})
	return &n
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

type counter struct {
	text, exclude string
	n             *atomic.Int64
}

// installCounting installs countLogged's logger once.
var installCounting sync.Once

// counters are the texts countLogged counts, for the test running (these
// tests do not run in parallel).
var (
	countersMu sync.Mutex
	counters   []counter
)

// clientBuilder hands the router the fake clientset.
type clientBuilder struct{ c kubernetes.Interface }

func (b clientBuilder) Config(string) (*rest.Config, error)         { return &rest.Config{}, nil }
func (b clientBuilder) ConfigOrDie(string) *rest.Config             { return &rest.Config{} }
func (b clientBuilder) Client(string) (kubernetes.Interface, error) { return b.c, nil }
func (b clientBuilder) ClientOrDie(string) kubernetes.Interface     { return b.c }
