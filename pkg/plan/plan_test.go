package plan_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/multicloud-ccm/multicloud-ccm/internal/awsfake"
	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	_ "github.com/multicloud-ccm/multicloud-ccm/pkg/backends/aws"
	_ "github.com/multicloud-ccm/multicloud-ccm/pkg/backends/baremetal"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/plan"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router"
)

const (
	region  = "eu-west-1"
	cluster = "plan"
)

// readOnly is a fake clientset holding objs that refuses every request
// but get, list and watch, and counts what it was asked.
type readOnly struct {
	*fake.Clientset
	mu     sync.Mutex
	writes []string
	reads  int
}

func newReadOnly(objs ...runtime.Object) *readOnly {
	c := &readOnly{Clientset: testutil.NewClientset(objs...)}
	c.PrependReactor("*", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		switch a.GetVerb() {
		case "get", "list", "watch":
			c.reads++
			return false, nil, nil
		}
		c.writes = append(c.writes, a.GetVerb()+" "+a.GetResource().Resource)
		return true, nil, fmt.Errorf("this client is read-only: %s %s refused", a.GetVerb(), a.GetResource().Resource)
	})
	return c
}

func (c *readOnly) Writes() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.writes...)
}

// world is a fake AWS (a VPC, two zones, three instances) and the config of
// a CCM with an aws backend and a bare-metal backend with a pool, the
// default for classless Services.
type world struct {
	aws   *awsfake.Server
	seed  awsfake.Seeded
	cfg   *config.CloudConfig
	nodes []*corev1.Node
}

func newWorld(t *testing.T) *world {
	t.Helper()
	f := awsfake.New(region)
	seeded := f.Seed(awsfake.SeedSpec{ClusterID: cluster, Instances: 3})
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	t.Setenv("PLAN_AWS_KEY", "AKIDPLAN")
	t.Setenv("PLAN_AWS_SECRET", "plan-secret")
	raw := fmt.Sprintf(`apiVersion: multicloud-ccm.io/v1alpha1
kind: CloudConfig
clusterID: %s
loadBalancer:
  defaultBackend: metal
backends:
- name: aws
  type: aws
  aws:
    region: %s
    vpc: %s
    endpoints: {ec2: %q, elbv2: %q, sts: %q}
    credentials: {accessKeyID: {env: PLAN_AWS_KEY}, secretAccessKey: {env: PLAN_AWS_SECRET}}
    retry: {maxAttempts: 2, maxBackoff: 5ms}
    # No test here is about the API budget: one no call waits on (the
    # default paced the switch and plan tests' hundreds of calls).
    rateLimits:
      ec2: {qps: 10000, bucket: 10000, qpsWrite: 10000, bucketWrite: 10000}
      elbv2: {qps: 10000, bucket: 10000, qpsWrite: 10000, bucketWrite: 10000}
- name: metal
  type: baremetal
  baremetal:
    inventory:
    - {name: bm-join, addresses: [{type: InternalIP, address: 10.0.0.50}]}
    addressPools:
    - name: public
      addresses: ["192.0.2.0/28"]
`, cluster, region, seeded.VPCID, srv.URL, srv.URL, srv.URL)
	cfg, err := config.Parse([]byte(raw), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	w := &world{aws: f, seed: seeded, cfg: cfg}
	for _, in := range seeded.Instances {
		w.nodes = append(w.nodes, testutil.NewNode(in.PrivateDNSName, testutil.WithProviderID("aws:///"+in.Zone+"/"+in.ID),
			testutil.WithInternalIP(in.PrivateIPs[0]), testutil.WithLabel("multicloud-ccm.io/backend", "aws")))
	}
	return w
}

// ensureForReal runs the CCM's own EnsureLoadBalancer (not dry) on each
// Service, through a router over w's backends, and writes the status it
// answered into the Service, as the service controller would.
func (w *world) ensureForReal(t *testing.T, svcs ...*corev1.Service) {
	t.Helper()
	r, err := router.NewFromConfig(context.Background(), w.cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, svc := range svcs {
		st, err := r.EnsureLoadBalancer(t.Context(), plan.ClusterName, svc.DeepCopy(), w.nodes)
		if err != nil {
			t.Fatalf("EnsureLoadBalancer(%s): %v", svc.Name, err)
		}
		svc.Status.LoadBalancer = *st
	}
}

func lbService(name string, tweaks ...testutil.ServiceTweak) *corev1.Service {
	svc := testutil.NewService(name, tweaks...)
	svc.Spec.Type = corev1.ServiceTypeLoadBalancer
	return svc
}

// TestPlan: a cluster with nodes of every kind and Services of every
// outcome. The plan names each node's backend and why, finds the node whose
// instance is gone (it would be deleted) and refuses the one no backend
// owns; it adopts the NLB already made (its one change: the gone
// instance's target deregistered), creates one, reports
// the NLB whose scheme annotation changed as replaced, adopts the address
// MetalLB gave (0 changes) and flags MetalLB's pool annotation, refuses an
// unknown backend, leaves another controller's class alone; the summary
// line counts them and the plan fails (a delete, a replacement, a
// refusal). Throughout it makes no mutating AWS call and the API server
// client is asked for lists only.
func TestPlan(t *testing.T) {
	w := newWorld(t)
	aws := testutil.WithAnnotation("multicloud-ccm.io/load-balancer-backend", "aws")
	kept := lbService("kept", aws)
	internal := lbService("to-internal", aws)
	w.ensureForReal(t, kept, internal)
	internal.Annotations["service.beta.kubernetes.io/aws-load-balancer-scheme"] = "internal"
	fresh := lbService("fresh", aws, testutil.WithAnnotation("service.beta.kubernetes.io/aws-load-balancer-healthcheck-interval", "10"),
		testutil.WithAnnotation("loadbalancer.openstack.org/keep-floatingip", "true"))
	metallb := lbService("from-metallb", testutil.WithAnnotation("metallb.universe.tf/address-pool", "public"))
	metallb.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.9"}}
	ghost := lbService("ghost", testutil.WithAnnotation("multicloud-ccm.io/load-balancer-backend", "ghost"))
	other := lbService("other-class", testutil.WithClass("example.com/other"))
	gone := w.seed.Instances[2]
	w.aws.RemoveInstance(gone.ID)
	stray := testutil.NewNode("stray", testutil.WithProviderID("kind://docker/kind/stray"))
	objs := []runtime.Object{kept, internal, fresh, metallb, ghost, other, stray}
	for _, n := range w.nodes {
		objs = append(objs, n)
	}
	client := newReadOnly(objs...)
	mutatingBefore := len(w.aws.MutatingCalls())

	rep, err := plan.Run(t.Context(), plan.Options{Config: w.cfg, Client: client})
	if err != nil {
		t.Fatal(err)
	}
	nodes := map[string]plan.NodePlan{}
	for _, n := range rep.Nodes {
		nodes[n.Name] = n
	}
	for i, in := range w.seed.Instances {
		n := nodes[in.PrivateDNSName]
		want := plan.NodeClaimed
		if i == 2 {
			want = plan.NodeDeleted
		}
		if n.Outcome != want || n.Backend != "aws" || n.ChosenBy != "label" {
			t.Errorf("node %s: %+v, want %s by aws (label)", in.PrivateDNSName, n, want)
		}
	}
	if n := nodes["stray"]; n.Outcome != plan.NodeError || !strings.Contains(n.Error, "kind://") {
		t.Errorf("node stray: %+v, want an error naming its scheme", n)
	}
	svcs := map[string]plan.ServicePlan{}
	for _, s := range rep.Services {
		svcs[s.Name] = s
		t.Logf("%s: %s by %s (%s), %d changes %v, annotations %v, error %q", s.Name, s.Outcome, s.Backend, s.ChosenBy, len(s.Changes), s.Changes, s.Annotations, s.Error)
	}
	check := func(name, outcome, backend, chosenBy string, changes int) {
		t.Helper()
		s := svcs[name]
		if s.Outcome != outcome || s.Backend != backend || s.ChosenBy != chosenBy || (changes >= 0 && len(s.Changes) != changes) {
			t.Errorf("service %s: %s by %q (%s), %d changes; want %s by %q (%s), %d changes", name, s.Outcome, s.Backend, s.ChosenBy, len(s.Changes), outcome, backend, chosenBy, changes)
		}
	}
	// The NLB made before is adopted; its one change is the target of the
	// instance that is gone.
	check("kept", plan.LBAdopted, "aws", "annotation", 1)
	if c := svcs["kept"].Changes; len(c) != 1 || c[0].Call != "elasticloadbalancing:DeregisterTargets" || !strings.Contains(c[0].What, gone.ID) {
		t.Errorf("kept: changes %+v, want the gone instance %s deregistered", c, gone.ID)
	}
	check("to-internal", plan.LBReplaced, "aws", "annotation", -1)
	check("fresh", plan.LBCreated, "aws", "annotation", -1)
	check("from-metallb", plan.LBAdopted, "metal", "default", 0)
	check("ghost", plan.LBRefused, "", "annotation", 0)
	check("other-class", plan.LBElsewhere, "", "class example.com/other (not in loadBalancer.classes)", 0)
	if s := svcs["from-metallb"]; s.NewAddress != "192.0.2.9" || len(s.Annotations) != 1 || s.Annotations[0].Problem != plan.AnnotationUnknown {
		t.Errorf("from-metallb: address %q, annotations %+v; want 192.0.2.9 kept and MetalLB's pool annotation unknown", s.NewAddress, s.Annotations)
	}
	if s := svcs["fresh"]; len(s.Annotations) != 1 || s.Annotations[0].Problem != plan.AnnotationNotHonoured {
		t.Errorf("fresh: annotations %+v, want OCCM's keep-floatingip not honoured by aws", s.Annotations)
	}
	want := "2 nodes claimed, 1 would be deleted, 1 refused; 2 load balancers adopted, 1 created, 1 replaced, 1 refused"
	if got := rep.Summary.String(); !strings.HasPrefix(got, want) {
		t.Errorf("summary %q, want it to start %q", got, want)
	}
	if !rep.Summary.Failed() {
		t.Error("the plan does not fail with a node to delete, a replacement and a refusal")
	}
	if got := w.aws.MutatingCalls()[mutatingBefore:]; len(got) != 0 {
		t.Errorf("the plan made %d mutating AWS calls: %v", len(got), got)
	}
	if got := client.Writes(); len(got) != 0 {
		t.Errorf("the plan asked the API server for writes: %v", got)
	}
	t.Logf("summary: %s; API server: %d reads, 0 writes", rep.Summary, client.reads)
}

// TestPlanOtherCCMsNodes (issue 45): beside multicloud-ccm serving bare
// metal only (nodes.platforms: [baremetal]), the plan leaves the nodes of
// other platforms to their CCMs and says whose each is: an AWS node
// (providerID aws://, initialised by upstream's AWS CCM), an hcloud node
// that names its platform with the KEP-5778 annotation and is still
// tainted (another CCM initialises it), and one of no known platform
// (proxmox://) while the platforms served are declared. None is claimed,
// refused, unmanaged or deleted; the summary counts them and the plan does
// not fail because of them. With --cloud-provider-platforms
// (router.SetPlatforms) restricting an aws-and-metal config to bare metal,
// the AWS backend's own nodes are another CCM's too.
func TestPlanOtherCCMsNodes(t *testing.T) {
	w := newWorld(t)
	metalOnly, err := config.Parse([]byte(`apiVersion: multicloud-ccm.io/v1alpha1
kind: CloudConfig
clusterID: plan
nodes:
  platforms: [baremetal]
backends:
- name: metal
  type: baremetal
  baremetal:
    inventory:
    - name: bm-1
      addresses: [{type: InternalIP, address: 10.0.0.11}]
`), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	annotated := func(n *corev1.Node) {
		n.Annotations = map[string]string{"cloudprovider.kubernetes.io/platform": "hcloud"}
	}
	objs := []runtime.Object{
		testutil.NewNode("bm-1", testutil.WithProviderID("baremetal://bm-1")),
		testutil.NewNode("ip-10-0-1-5", testutil.WithProviderID("aws:///eu-west-1a/i-0123456789abcdef0")),
		testutil.NewNode("hc-1", annotated, testutil.Uninitialized, testutil.NotReady),
		testutil.NewNode("px-1", testutil.WithProviderID("proxmox://cluster/100")),
	}
	rep, err := plan.Run(t.Context(), plan.Options{Config: metalOnly, Client: newReadOnly(objs...)})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"ip-10-0-1-5": "aws", "hc-1": "hcloud", "px-1": "proxmox"}
	for _, n := range rep.Nodes {
		switch p, foreign := want[n.Name]; {
		case foreign && (n.Outcome != plan.NodeOtherCCM || n.Platform != p || n.Backend != "" || n.Error != ""):
			t.Errorf("node %s: %+v, want left to the CCM of platform %s", n.Name, n, p)
		case !foreign && (n.Outcome != plan.NodeClaimed || n.Backend != "metal"):
			t.Errorf("node %s: %+v, want claimed by metal", n.Name, n)
		}
	}
	if got, want := rep.Summary.String(), "1 nodes claimed, 0 would be deleted, 3 left to other CCMs;"; !strings.HasPrefix(got, want) {
		t.Errorf("summary %q, want it to start %q", got, want)
	}
	if rep.Summary.Failed() || rep.Summary.NodesOtherCCMs != 3 {
		t.Errorf("summary %+v: other CCMs' nodes make the plan fail or are not counted", rep.Summary)
	}

	// The flag restricts an aws-and-metal config to bare metal: the AWS
	// backend's nodes are left to another CCM (upstream's AWS CCM).
	router.SetPlatforms([]string{"baremetal"})
	t.Cleanup(func() { router.SetPlatforms(nil) })
	var nodes []runtime.Object
	for _, n := range w.nodes {
		n = n.DeepCopy()
		delete(n.Labels, "multicloud-ccm.io/backend")
		nodes = append(nodes, n)
	}
	rep, err = plan.Run(t.Context(), plan.Options{Config: w.cfg, Client: newReadOnly(nodes...)})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range rep.Nodes {
		if n.Outcome != plan.NodeOtherCCM || n.Platform != "aws" {
			t.Errorf("node %s with --cloud-provider-platforms=baremetal: %+v, want left to the CCM of platform aws", n.Name, n)
		}
	}
}
