package planswitch

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/multicloud-ccm/multicloud-ccm/internal/awsfake"
	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/plan"
	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/framework"
	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/sims/vcsim"
)

// The clouds of the cross-cloud differential (issue 43): a world is a
// private control plane, the AWS wire fake (internal/awsfake) with a VPC
// and instances, a vCenter simulator (test/e2e/sims/vcsim) with VMs, and a
// bare-metal backend; its cluster is built from node and Service cases in
// the order a real migration has: the CCM before the plan serves the
// Services with a history (with the config's default backend aws), the
// clouds then change behind its back, new nodes join, Services are edited
// and new ones made; then the plan, then the switch (the default moved to
// metal: a config change).

const (
	region    = "eu-west-1"
	accessKey = "AKIDPLANX"
	// worldPool is the bare-metal pool of a world (MetalLB's leftovers
	// are drawn from its upper half).
	worldPool = "192.0.2.0/27"
	// vsBackend is the vsphere backend's name.
	vsBackend = "onprem"
	// servedDefault is a case's history "served by the default backend,
	// no annotation".
	servedDefault = "default"
	// del removes an annotation in svcCase.ann.
	del = "-"

	awsType     = "service.beta.kubernetes.io/aws-load-balancer-type"
	awsScheme   = "service.beta.kubernetes.io/aws-load-balancer-scheme"
	tagService  = "kubernetes.io/service-name"
	lbFinalizer = "service.kubernetes.io/load-balancer-cleanup"
)

// nodeCase is one Node of a world.
type nodeCase struct {
	name string
	// cloud is aws or vsphere (its instance the index-th seeded instance
	// or VM), metal (its machine the inventory's of its name, bm-1..bm-3,
	// if any), or hcloud (another CCM's platform, by its KEP-5778
	// annotation).
	cloud string
	index int
	// initialised: a CCM initialised it before the plan (providerID, no
	// taint); else it joins tainted after the CCM before the plan stopped
	// (aws with its providerID, as kubelet --provider-id gives it; vsphere
	// with its BIOS UUID in nodeInfo; metal with only its name).
	initialised bool
	notReady    bool
	// instance is what happens to its instance before the plan: "" none,
	// "gone" (terminated, destroyed), "off" (powered off, vsphere).
	instance string
	// want is the outcome the plan must give ("" for any: random worlds).
	want string
}

// svcCase is one LoadBalancer Service of a world.
type svcCase struct {
	name string
	// served is the backend annotation the Service carried when the CCM
	// before the plan served it (servedDefault: none); "" for no history.
	served string
	// upstreamNLB: cloud-provider-aws made its NLB (its status and
	// finalizer say so); status: an address another controller (MetalLB)
	// wrote.
	upstreamNLB bool
	status      string
	// ann are its annotations at plan time (del removes one it had);
	// local gives it externalTrafficPolicy Local; class a loadBalancerClass.
	ann   map[string]string
	local bool
	class string
	// want is the outcome the plan must give, and wantGone the backends it
	// must delete from (DeletedFrom and DrainedFrom), for the fixed table.
	want     string
	wantGone []string
}

// world is one cluster with its clouds.
type world struct {
	t   *testing.T
	ctx context.Context
	cp  *framework.ControlPlane
	// fake is the AWS fake, served at awsURL through rec, which
	// attributes each mutating call to its Service.
	fake   *awsfake.Server
	awsURL string
	rec    *awsRecorder
	seeded awsfake.Seeded
	sim    *vcsim.Simulator
	// vms are the simulator's VMs as it started (Destroy shortens its
	// list).
	vms []vcsim.VM
	vs  vcsim.Backend
	// os is the OpenStack stack (nil when its environment is not set),
	// clusterID the world's own (the stack is shared, and outlives runs).
	os        *osStack
	clusterID string
	env       []string
	pool      string
	nodes     []nodeCase
	svcs      []svcCase
	// tainted are the nodes that joined tainted (the switch initialises
	// them).
	tainted map[string]bool
	// vips are the Octavia VIPs known when the switch starts.
	vips map[string]bool
	// firstAWSNode is when the world's first AWS node was created (the
	// aws backend's grace for new nodes counts from then).
	firstAWSNode time.Time
}

// newWorld starts a world's control plane and clouds: awsInstances
// instances and vms VMs, and the OpenStack backend when its stack is up
// (withOpenStack: the world's cases need it).
func newWorld(t *testing.T, awsInstances, vms int, withOpenStack bool) *world {
	t.Helper()
	bound := 8 * time.Minute
	if withOpenStack {
		bound = 20 * time.Minute // Octavia's pace, on a busy machine
	}
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	t.Cleanup(cancel)
	w := &world{t: t, ctx: ctx, pool: worldPool, tainted: map[string]bool{}, clusterID: fmt.Sprintf("planx%06x", rand.Uint32()>>8)}
	if withOpenStack {
		if w.os = openStack(t, w.clusterID); w.os == nil {
			testutil.Unavailable(t, `no real Keystone + Octavia + Neutron: make openstack-up, then set -a; . _output/openstack.env (OS_AUTH_URL, OS_PASSWORD_FILE, OCTAVIA_NEUTRON_ENDPOINT, OCTAVIA_E2E, NEUTRON_ENDPOINT, NEUTRON_E2E, NOVA_ENDPOINT)`)
		}
		t.Cleanup(func() { w.os.cleanUp(t, w.clusterID) })
	}
	w.cp = framework.StartControlPlaneT(t)
	if err := w.cp.Binaries.Check([]string{w.cp.Binaries.CCM}); err != nil {
		framework.MissingBinaries(t, err)
	}
	f := awsfake.New(region)
	w.seeded = f.Seed(awsfake.SeedSpec{ClusterID: w.clusterID, Instances: awsInstances})
	f.SetAccessKeys(accessKey)
	w.fake, w.rec = f, &awsRecorder{fake: f}
	srv := httptest.NewServer(w.rec)
	t.Cleanup(srv.Close)
	w.awsURL = srv.URL
	var err error
	if w.sim, err = vcsim.Start(ctx, vcsim.Options{VMs: vms}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.sim.Close)
	w.vms = slices.Clone(w.sim.VMs)
	w.vs = vcsim.NewBackend(vsBackend, w.sim)
	w.env = append(w.vs.Env(), "PLANX_AWS_ACCESS_KEY_ID="+accessKey, "PLANX_AWS_SECRET_ACCESS_KEY=secret")
	if _, err := w.cp.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return w
}

// config is the world's cloud-config: bare metal (machines bm-1..bm-3,
// the pool), aws on the fake, vsphere on the simulator. The CCM before the
// plan has default backend aws and a machine gone-1 that then leaves the
// inventory; the plan and the switch default metal.
func (w *world) config(before bool) string {
	def, gone := "metal", ""
	if before {
		def, gone = "aws", "\n    - {name: gone-1, addresses: [{type: InternalIP, address: "+metalIPs["gone-1"]+"}]}"
	}
	return fmt.Sprintf(`apiVersion: multicloud-ccm.io/v1alpha1
kind: CloudConfig
clusterID: %[1]s
loadBalancer:
  defaultBackend: %[2]s
backends:
- name: metal
  type: baremetal
  baremetal:
    inventory:
    - {name: bm-1, addresses: [{type: InternalIP, address: 10.0.0.11}]}
    - {name: bm-2, addresses: [{type: InternalIP, address: 10.0.0.12}]}
    - {name: bm-3, addresses: [{type: InternalIP, address: 10.0.0.13}]}%[7]s
    addressPools: [{name: public, addresses: [%[3]q]}]
- name: aws
  type: aws
  aws:
    region: %[4]s
    vpc: %[5]s
    endpoints: {ec2: %[6]q, elbv2: %[6]q, sts: %[6]q}
    credentials:
      accessKeyID: {env: PLANX_AWS_ACCESS_KEY_ID}
      secretAccessKey: {env: PLANX_AWS_SECRET_ACCESS_KEY}
    instanceCacheTTL: 1s
    retry: {maxAttempts: 2, maxBackoff: 100ms}
    rateLimits: {ec2: {qps: -1, qpsWrite: -1}, elbv2: {qps: -1, qpsWrite: -1}}
`, w.clusterID, def, w.pool, region, w.seeded.VPCID, w.awsURL, gone) + w.vs.YAML() + w.osYAML()
}

func (w *world) osYAML() string {
	if w.os == nil {
		return ""
	}
	return w.os.yaml()
}

// build makes the cluster of the world's cases, as described at the top.
func (w *world) build() {
	w.t.Helper()
	if w.os != nil {
		for _, n := range w.nodes {
			if n.clockBound() {
				w.t.Fatalf("node %s: a world with Octavia must not hold a node whose outcome depends on its age (clockBound)", n.name)
			}
		}
	}
	// The Services served by OpenStack before the plan first, before the
	// AWS nodes join: Octavia makes their load balancers one after
	// another (a minute or more when the machine is busy), and the aws
	// backend refuses to call an instance gone for a node less than 2
	// minutes old; the switch must see the AWS nodes that young.
	start := time.Now()
	for _, late := range []bool{false, true} {
		var history []svcCase
		for _, n := range w.nodes {
			if n.initialised && (n.cloud == "aws") == late {
				w.node(n)
			}
		}
		for _, s := range w.svcs {
			if s.served != "" && (s.served != "os") == late {
				history = append(history, s)
				w.createService(s, s.served)
			}
		}
		if len(history) > 0 {
			w.serveBefore(history)
		}
	}
	w.t.Logf("history served in %v", time.Since(start))
	// cloud-provider-aws made its NLBs while every instance ran.
	for _, s := range w.svcs {
		if s.served == "" && s.upstreamNLB {
			w.upstreamNLB(w.createService(s, ""))
		}
	}
	for _, n := range w.nodes {
		w.instanceFate(n)
		if !n.initialised {
			w.node(n)
			w.tainted[n.name] = true
		}
	}
	for _, s := range w.svcs {
		if s.served != "" {
			w.edit(s)
			continue
		}
		if s.upstreamNLB {
			continue
		}
		created := w.createService(s, "")
		if s.status != "" {
			w.writeStatus(created, corev1.LoadBalancerIngress{IP: s.status})
		}
	}
}

// node creates a node of case n.
func (w *world) node(n nodeCase) {
	w.t.Helper()
	var tweaks []framework.NodeTweak
	uuid := ""
	switch n.cloud {
	case "aws":
		in := w.seeded.Instances[n.index]
		tweaks = append(tweaks, framework.WithProviderID(fmt.Sprintf("aws:///%s/%s", in.Zone, in.ID)))
	case "vsphere":
		vm := w.vms[n.index]
		if n.initialised {
			tweaks = append(tweaks, framework.WithProviderID(vm.ProviderID()))
		}
		uuid = strings.ToUpper(vm.UUID)
	case "metal":
		if n.initialised {
			tweaks = append(tweaks, framework.WithProviderID("baremetal://"+n.name))
		}
	case "hcloud":
		tweaks = append(tweaks, func(node *corev1.Node) {
			node.Annotations = map[string]string{"cloudprovider.kubernetes.io/platform": "hcloud"}
		})
	}
	if n.initialised {
		// As a CCM initialised it: no taint, its addresses.
		tweaks = append(tweaks, framework.WithoutUninitializedTaint(), framework.WithAddresses(w.addresses(n)...))
	}
	if n.notReady {
		tweaks = append(tweaks, framework.WithReady(corev1.ConditionFalse))
	}
	if _, err := framework.CreateNode(w.ctx, w.cp.Client, framework.NewNode(n.name, tweaks...)); err != nil {
		w.t.Fatal(err)
	}
	if n.cloud == "aws" && w.firstAWSNode.IsZero() {
		w.firstAWSNode = time.Now()
	}
	if uuid == "" {
		return
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"nodeInfo": map[string]any{"systemUUID": uuid}}})
	if err != nil {
		w.t.Fatal(err)
	}
	if _, err := w.cp.Client.CoreV1().Nodes().Patch(w.ctx, n.name, k8stypes.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		w.t.Fatal(err)
	}
}

// addresses are the addresses a CCM gives the node of case n.
func (w *world) addresses(n nodeCase) []corev1.NodeAddress {
	switch n.cloud {
	case "aws":
		in := w.seeded.Instances[n.index]
		return []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: in.PrivateIPs[0]},
			{Type: corev1.NodeInternalDNS, Address: in.PrivateDNSName}, {Type: corev1.NodeHostName, Address: in.PrivateDNSName}}
	case "vsphere":
		vm := w.vms[n.index]
		return []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: vm.IP}, {Type: corev1.NodeExternalIP, Address: vm.IP}, {Type: corev1.NodeHostName, Address: vm.HostName}}
	case "metal":
		if ip := metalIPs[n.name]; ip != "" {
			return []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}
		}
	}
	return nil
}

// instanceFate ends or stops the node's instance behind every CCM's back.
func (w *world) instanceFate(n nodeCase) {
	w.t.Helper()
	var err error
	switch {
	case n.instance == "gone" && n.cloud == "aws":
		w.fake.SetInstanceState(w.seeded.Instances[n.index].ID, "terminated")
	case n.instance == "gone" && n.cloud == "vsphere":
		err = w.sim.Destroy(w.ctx, w.vms[n.index].Name)
	case n.instance == "off" && n.cloud == "vsphere":
		err = w.sim.PowerOff(w.ctx, w.vms[n.index].Name)
	}
	if err != nil {
		w.t.Fatal(err)
	}
}

// createService creates the Service of case s with the backend annotation
// b ("" or servedDefault: none) and, for a Service with no history, its
// plan-time annotations.
func (w *world) createService(s svcCase, b string) *corev1.Service {
	w.t.Helper()
	svc := framework.NewLoadBalancerService(ns, s.name)
	if b != "" && b != servedDefault {
		svc.Annotations[string(annotation.LoadBalancerBackend)] = b
	}
	if s.served == "" {
		applyAnnotations(svc, s.ann)
		if s.local {
			svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		}
		if s.class != "" {
			svc.Spec.LoadBalancerClass = &s.class
		}
	}
	created, err := framework.CreateService(w.ctx, w.cp.Client, svc)
	if err != nil {
		w.t.Fatal(err)
	}
	return created
}

func applyAnnotations(svc *corev1.Service, ann map[string]string) {
	for k, v := range ann {
		if v == del {
			delete(svc.Annotations, k)
		} else {
			svc.Annotations[k] = v
		}
	}
}

// edit gives a Service with a history its plan-time annotations and
// traffic policy, retrying on conflicts.
func (w *world) edit(s svcCase) {
	w.t.Helper()
	err := framework.WaitFor(w.ctx, 20*time.Second, "edit "+s.name, func(ctx context.Context) (bool, string, error) {
		svc, err := w.cp.Client.CoreV1().Services(ns).Get(ctx, s.name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		applyAnnotations(svc, s.ann)
		if s.local {
			svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		}
		_, err = w.cp.Client.CoreV1().Services(ns).Update(ctx, svc, metav1.UpdateOptions{})
		return err == nil, fmt.Sprint(err), nil
	})
	if err != nil {
		w.t.Fatal(err)
	}
}

// serveBefore runs the CCM before the plan (default backend aws) until it
// served every Service with a history, then stops it.
func (w *world) serveBefore(history []svcCase) {
	w.t.Helper()
	ccm := w.startCCM("before", true)
	for _, s := range history {
		want := s.served
		if want == servedDefault {
			want = "aws"
		}
		bound := settle
		if slices.Contains(strings.Split(want, ","), "os") {
			bound = 2 * octaviaBound // Octavia makes them one after another
		}
		framework.Eventually(w.t, bound, s.name+" served before the plan by "+want, framework.ServiceMatches(w.cp.Client, ns, s.name, func(svc *corev1.Service) (bool, string) {
			served := svc.Annotations[string(annotation.LoadBalancerServedBy)]
			n := len(strings.Split(want, ","))
			return served == want && len(svc.Status.LoadBalancer.Ingress) == n, fmt.Sprintf("served-by %q, status %v", served, svc.Status.LoadBalancer.Ingress)
		}))
	}
	// Its history settled: the node syncs that follow the first syncs done.
	w.quietCalls()
	if err := ccm.Stop(15 * time.Second); err != nil {
		w.t.Fatal(err)
	}
}

// startCCM starts the binary as the CCM with the world's config (the one
// before the plan, or the switch's), stopped when the test ends.
func (w *world) startCCM(name string, before bool) *framework.CCM {
	w.t.Helper()
	ccm := w.cp.StartCCMT(w.t, framework.CCMOptions{Name: name, CloudConfig: w.config(before), Env: w.env})
	w.t.Cleanup(func() {
		if w.t.Failed() {
			w.t.Logf("AWS calls: %v", w.fake.CallCounts())
		}
	})
	return ccm
}

// upstreamNLB makes the NLB cloud-provider-aws makes for svc (its name,
// tags, an upstream-named target group with the instances as targets, a
// tagged TCP listener; no security groups, its default), and writes the
// NLB's DNS name in the status with upstream's finalizer.
func (w *world) upstreamNLB(svc *corev1.Service) {
	w.t.Helper()
	elb := elbv2.New(elbv2.Options{Region: region, BaseEndpoint: awssdk.String(w.awsURL),
		Credentials: credentials.NewStaticCredentialsProvider(accessKey, "secret", "")})
	tags := []elbtypes.Tag{{Key: awssdk.String(tagService), Value: awssdk.String(ns + "/" + svc.Name)},
		{Key: awssdk.String("kubernetes.io/cluster/" + w.clusterID), Value: awssdk.String("owned")}}
	lb, err := elb.CreateLoadBalancer(w.ctx, &elbv2.CreateLoadBalancerInput{Name: awssdk.String(cloudprovider.DefaultLoadBalancerName(svc)),
		Type: elbtypes.LoadBalancerTypeEnumNetwork, Subnets: w.seeded.PublicSubnets, Tags: tags})
	if err != nil {
		w.t.Fatal(err)
	}
	port := svc.Spec.Ports[0].NodePort
	tg, err := elb.CreateTargetGroup(w.ctx, &elbv2.CreateTargetGroupInput{Name: awssdk.String(fmt.Sprintf("k8s-%.8s-%.8s-0a1b2c3d4e", ns, svc.Name)),
		Protocol: elbtypes.ProtocolEnumTcp, Port: awssdk.Int32(port), VpcId: awssdk.String(w.seeded.VPCID), TargetType: elbtypes.TargetTypeEnumInstance,
		HealthCheckProtocol: elbtypes.ProtocolEnumTcp, HealthCheckPort: awssdk.String("traffic-port"), HealthCheckIntervalSeconds: awssdk.Int32(30),
		HealthyThresholdCount: awssdk.Int32(3), UnhealthyThresholdCount: awssdk.Int32(3), Tags: tags})
	if err != nil {
		w.t.Fatal(err)
	}
	var targets []elbtypes.TargetDescription
	for _, n := range w.nodes {
		if n.cloud == "aws" && n.initialised {
			targets = append(targets, elbtypes.TargetDescription{Id: awssdk.String(w.seeded.Instances[n.index].ID), Port: awssdk.Int32(port)})
		}
	}
	// No AWS node initialised: upstream registers nothing (and the SDK
	// refuses an empty list; random world seed 1796239464041781550).
	if len(targets) > 0 {
		if _, err := elb.RegisterTargets(w.ctx, &elbv2.RegisterTargetsInput{TargetGroupArn: tg.TargetGroups[0].TargetGroupArn, Targets: targets}); err != nil {
			w.t.Fatal(err)
		}
	}
	if _, err := elb.CreateListener(w.ctx, &elbv2.CreateListenerInput{LoadBalancerArn: lb.LoadBalancers[0].LoadBalancerArn, Port: awssdk.Int32(svc.Spec.Ports[0].Port),
		Protocol: elbtypes.ProtocolEnumTcp, Tags: tags,
		DefaultActions: []elbtypes.Action{{Type: elbtypes.ActionTypeEnumForward, TargetGroupArn: tg.TargetGroups[0].TargetGroupArn}}}); err != nil {
		w.t.Fatal(err)
	}
	svc.Finalizers = append(svc.Finalizers, lbFinalizer)
	updated, err := w.cp.Client.CoreV1().Services(ns).Update(w.ctx, svc, metav1.UpdateOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	w.writeStatus(updated, corev1.LoadBalancerIngress{Hostname: awssdk.ToString(lb.LoadBalancers[0].DNSName)})
}

func (w *world) writeStatus(svc *corev1.Service, in corev1.LoadBalancerIngress) {
	w.t.Helper()
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{in}
	if _, err := w.cp.Client.CoreV1().Services(ns).UpdateStatus(w.ctx, svc, metav1.UpdateOptions{}); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) resetOS() {
	if w.os != nil {
		w.os.rec.Reset()
		w.os.neutron.Reset()
	}
}

// nlbsOf lists the DNS names of the fake's NLBs tagged for the Service.
func (w *world) nlbsOf(name string) []string {
	var out []string
	for _, lb := range w.fake.LoadBalancers() {
		if lb.Tags[tagService] == ns+"/"+name {
			out = append(out, lb.DNSName)
		}
	}
	return out
}

// planWorld runs the built binary's plan on the world with the switch's
// config and checks it made no mutating AWS call.
func (w *world) planWorld() (*plan.Report, int) {
	w.t.Helper()
	cfg := filepath.Join(w.t.TempDir(), "cloud-config.yaml")
	if err := os.WriteFile(cfg, []byte(w.config(false)), 0o600); err != nil {
		w.t.Fatal(err)
	}
	w.fake.ResetCalls()
	w.rec.Reset()
	w.resetOS()
	rep, code := runPlan(w.t, w.cp, cfg, w.env...)
	if m := w.fake.MutatingCalls(); len(m) > 0 {
		w.t.Errorf("the plan made mutating AWS calls: %v", m)
	}
	if w.os != nil {
		if m := w.os.rec.Calls(); len(m) > 0 {
			w.t.Errorf("the plan made mutating Octavia calls: %v", m)
		}
		if m := w.os.neutron.Calls(); len(m) > 0 {
			w.t.Errorf("the plan made mutating Neutron calls: %v", m)
		}
	}
	w.rec.Reset()
	w.resetOS()
	return rep, code
}

// wantPlanned checks the plan against the fixed table's expectations: a
// case meant as a deletion, a replacement, ... is planned as one (else the
// differential would not test what the table says).
func (w *world) wantPlanned(rep *plan.Report) {
	w.t.Helper()
	nodes := map[string]plan.NodePlan{}
	for _, n := range rep.Nodes {
		nodes[n.Name] = n
		w.t.Logf("plan: node %s %s by %q (%s), providerID %q -> %q, shutdown %v %s%s", n.Name, n.Outcome, n.Backend, n.ChosenBy, n.ProviderID, n.NewProviderID, n.Shutdown, n.Platform, n.Error)
	}
	for _, n := range w.nodes {
		if got, ok := nodes[n.name]; n.want != "" && (!ok || got.Outcome != n.want) {
			w.t.Errorf("node %s: planned %q (%s), the case expects %q", n.name, got.Outcome, got.Error, n.want)
		}
	}
	svcs := map[string]plan.ServicePlan{}
	for _, s := range rep.Services {
		svcs[s.Name] = s
		w.t.Logf("plan: %s %s by %q (%s): %q -> %q, %d changes, deleted from %v, drained from %v, targets %v %s", s.Name, s.Outcome, s.Backend, s.ChosenBy, s.Address, s.NewAddress, len(s.Changes), s.DeletedFrom, s.DrainedFrom, s.Targets, s.Error)
	}
	for _, s := range w.svcs {
		got, ok := svcs[s.name]
		gone := slices.Concat(got.DeletedFrom, got.DrainedFrom)
		if s.want != "" && (!ok || got.Outcome != s.want || !slices.Equal(gone, s.wantGone)) {
			w.t.Errorf("service %s: planned %q deleting from %v (%s), the case expects %q deleting from %v", s.name, got.Outcome, gone, got.Error, s.want, s.wantGone)
		}
	}
	if len(rep.Nodes) != len(w.nodes) || len(rep.Services) != len(w.svcs) {
		w.t.Errorf("planned %d nodes and %d Services, the world has %d and %d", len(rep.Nodes), len(rep.Services), len(w.nodes), len(w.svcs))
	}
}

// String describes the case, for the log of a random world.
func (s svcCase) String() string {
	return fmt.Sprintf("%s (served %q, upstream NLB %v, status %q, annotations %v, local %v, class %q)", s.name, s.served, s.upstreamNLB, s.status, sortedAnn(s.ann), s.local, s.class)
}

func sortedAnn(m map[string]string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, k+"="+m[k])
	}
	return out
}
