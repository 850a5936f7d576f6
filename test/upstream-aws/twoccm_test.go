package upstreamaws

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/multicloud-ccm/multicloud-ccm/internal/awsfake"
	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/framework"
	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/sims/vcsim"
)

// The field managers (the first word of each client's user agent, which
// the kube-apiserver records in managedFields) of the two CCMs: who wrote a
// Node, a Service or an Event, whatever controller name it reports.
const (
	upstreamManager = "aws-cloud-controller-manager"
	ourManager      = "multicloud-ccm"
)

const (
	twoNS        = "default"
	metalClass   = "multicloud-ccm.io/metal"
	twoMetalPool = "192.0.2.0/28"
	platformAnn  = "cloudprovider.kubernetes.io/platform"
	backendLabel = "multicloud-ccm.io/backend"
	platformLbl  = "node.cloudprovider.kubernetes.io/platform"
	upstreamKey  = "AKIDUPSTREAM"
	ourKey       = "AKIDOURS"
	twoSettle    = 60 * time.Second
)

// besideConfig is multicloud-ccm's cloud-config beside upstream's AWS CCM:
// vSphere and bare metal serve nodes; an aws backend (the same account,
// its own key) is configured but its platform is not ours
// (nodes.platforms), so the aws:// nodes are left to upstream; classless
// Services are not ours (no defaultBackend), our class is.
const besideConfig = `apiVersion: multicloud-ccm.io/v1alpha1
kind: CloudConfig
clusterID: e2e
nodes:
  platforms: [vsphere, baremetal]
loadBalancer:
  classes: [{name: ` + metalClass + `, backend: metal}]
backends:
- name: metal
  type: baremetal
  baremetal:
    inventory: [{name: bm-1, addresses: [{type: InternalIP, address: 10.0.0.11}]}, {name: bm-2, addresses: [{type: InternalIP, address: 10.0.0.12}]}]
    addressPools: [{name: public, addresses: ["` + twoMetalPool + `"], autoAssign: true}]
- name: aws
  type: aws
  aws:
    region: ` + region + `
    vpc: %[2]s
    endpoints: {ec2: %[1]q, elbv2: %[1]q, sts: %[1]q}
    credentials:
      accessKeyID: {env: TWOCCM_AWS_ACCESS_KEY_ID}
      secretAccessKey: {env: TWOCCM_AWS_SECRET_ACCESS_KEY}
%[3]s`

// upstreamCloudConfig is upstream's cloud-config for the fake at url: every
// service endpoint overridden, the control plane declared outside AWS (VPC,
// subnet and cluster ID given) so that nothing asks the instance metadata
// service; global are more lines of its [Global] section.
func upstreamCloudConfig(url, vpc, subnet string, global ...string) string {
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "[Global]\nRegion = %s\nVPC = %s\nSubnetID = %s\nKubernetesClusterID = %s\n", region, vpc, subnet, clusterID)
	for _, line := range global {
		fmt.Fprintln(&cfg, line)
	}
	// Service is the SDK's service ID, as upstream's resolvers compare it.
	for i, svc := range [][2]string{{"EC2", "ec2"}, {"Elastic Load Balancing", "elasticloadbalancing"},
		{"Elastic Load Balancing v2", "elasticloadbalancing"}, {"KMS", "kms"}} {
		fmt.Fprintf(&cfg, "[ServiceOverride %q]\nService = %s\nRegion = %s\nURL = %s\nSigningRegion = %s\nSigningName = %s\n", fmt.Sprint(i), svc[0], region, url, region, svc[1])
	}
	return cfg.String()
}

// upstreamBinary returns upstream's aws-cloud-controller-manager, built
// from this module's version of k8s.io/cloud-provider-aws into
// <repo>/_output/upstream-aws/<version>/ on first use, so that reruns
// reuse it.
func upstreamBinary(t *testing.T) string {
	t.Helper()
	gocmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("building upstream's CCM needs the go command: %v", err)
	}
	out, err := exec.Command(gocmd, "list", "-m", "-f", "{{.Version}}", "k8s.io/cloud-provider-aws").Output() //nolint:gosec // The go command on PATH.
	version := strings.TrimSpace(string(out))
	if err != nil || version == "" {
		t.Fatalf("the version of k8s.io/cloud-provider-aws in this module: %q, %v", out, err)
	}
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(root, "_output", "upstream-aws", version, "aws-cloud-controller-manager")
	if fi, err := os.Stat(bin); err == nil && fi.Mode()&0o111 != 0 {
		return bin
	}
	start := time.Now()
	cmd := exec.Command(gocmd, "build", "-o", bin, "k8s.io/cloud-provider-aws/cmd/aws-cloud-controller-manager") //nolint:gosec // The go command on PATH.
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build upstream's aws-cloud-controller-manager %s: %v\n%s", version, err, out)
	}
	t.Logf("built upstream's aws-cloud-controller-manager %s in %s", version, time.Since(start).Round(time.Second))
	return bin
}

// startUpstream runs upstream's CCM against cp with its node, node-lifecycle
// and service controllers (its defaults less the route controller), as a
// managed control plane runs it, and waits for its /healthz.
func startUpstream(t *testing.T, cp *framework.ControlPlane, bin, cloudConfig string) *framework.Process {
	t.Helper()
	dir := filepath.Join(cp.Dir, "upstream-aws")
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "cloud.conf")
	if err := os.WriteFile(cfgPath, []byte(cloudConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	port, err := framework.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	kc := cp.AdminKubeconfig
	p, err := framework.StartProcess(framework.ProcessOptions{
		Name: "upstream-aws", Path: bin, LogPath: filepath.Join(dir, "upstream-aws.log"),
		Args: []string{"--cloud-provider=aws", "--cloud-config=" + cfgPath,
			"--kubeconfig=" + kc, "--authentication-kubeconfig=" + kc, "--authorization-kubeconfig=" + kc,
			"--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(port),
			"--cert-dir=" + filepath.Join(dir, "certs"), "--configure-cloud-routes=false",
			"--controllers=cloud-node,cloud-node-lifecycle,service", "--cluster-name=" + clusterID,
			"--node-monitor-period=1s", "--node-status-update-frequency=5s", "--v=2"},
		Env: append(os.Environ(), "AWS_ACCESS_KEY_ID="+upstreamKey, "AWS_SECRET_ACCESS_KEY=secret", "AWS_EC2_METADATA_DISABLED=true"),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.Stop(15 * time.Second)
		if t.Failed() {
			t.Logf("----- upstream-aws log (%s) -----\n%s", p.LogPath(), p.LogTail(framework.LogLines))
		}
	})
	httpc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}}} //nolint:gosec // Loopback, self-signed.
	framework.Eventually(t, 60*time.Second, "upstream's CCM /healthz", func(ctx context.Context) (bool, string, error) {
		if exited, err := p.Exited(); exited {
			return false, "", fmt.Errorf("upstream's CCM exited: %w\n%s", err, p.LogTail(40))
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d/healthz", port), nil)
		if err != nil {
			return false, "", err
		}
		resp, err := httpc.Do(req)
		if err != nil {
			return false, err.Error(), nil
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status, nil
	})
	return p
}

// managers lists the field managers that wrote obj.
func managers(obj metav1.Object) []string {
	var out []string
	for _, f := range obj.GetManagedFields() {
		if !slices.Contains(out, f.Manager) {
			out = append(out, f.Manager)
		}
	}
	return out
}

// twoNode is one node of the scenario and the CCM that must initialise it.
type twoNode struct {
	name   string
	owner  string // upstreamManager or ourManager
	tweaks []framework.NodeTweak
	// check says what is wrong with the initialised node ("" when right).
	check func(*corev1.Node) string
}

func hasAddr(n *corev1.Node, addr string) bool {
	return slices.ContainsFunc(n.Status.Addresses, func(a corev1.NodeAddress) bool { return a.Address == addr })
}

// TestBesideUpstreamAWSCCM runs the built multicloud-ccm beside upstream's
// built aws-cloud-controller-manager (k8s.io/cloud-provider-aws, this
// module's version, against internal/awsfake) on a real kube-apiserver, as
// a managed cluster's own CCM that cannot be turned off: upstream serves
// the aws:// nodes and classless Services, ours (nodes.platforms: [vsphere,
// baremetal], an aws backend configured but not its platform) serves the
// vSphere (vcsim) and bare-metal nodes and Services of its class. Nodes of
// both kinds join tainted, in two waves, with and without providerIDs (an
// aws node without one is found by upstream by its private DNS name and
// annotated cloudprovider.kubernetes.io/platform=aws for us, as KEP-5778
// says); then every node goes NotReady for a while, as when the kubelets
// lose the API server, which runs both node-lifecycle controllers on every
// node. Then: each node initialised by exactly one CCM (the managedFields
// of the Node: which program wrote it; its providerID, labels and
// addresses those of its cloud; the backend label only on ours), no
// uninitialised taint left, no node deleted, each Service served by
// exactly one (upstream's NLB in the fake for the classless one, a
// bare-metal address for the classed one, each Service written by its
// CCM only, under its CCM's cleanup finalizer alone: upstream's shared one
// on the classless Service, ours on the classed one). A Service of our
// class that an earlier version of ours left under the shared finalizer
// (created before our CCM starts) is moved to ours with its address kept,
// then turned ClusterIP: ours releases it, upstream never acts. Then the
// other two Services are deleted: each is gone (its finalizer removed by its CCM), upstream's
// NLB and target groups are gone, and our aws backend made no call (the
// fake refuses our key from then on). Last, no event on any Node or
// Service, deletions included, written by the CCM that does not own it.
func TestBesideUpstreamAWSCCM(t *testing.T) {
	started := time.Now()
	framework.RequireBinaries(t, nil)
	bin := upstreamBinary(t)
	built := time.Now()
	cp := framework.StartControlPlaneT(t)
	c := cp.Client
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	fake := awsfake.New(region)
	seeded := fake.Seed(awsfake.SeedSpec{ClusterID: clusterID, Instances: 2, NodeSecurityGroup: true})
	fake.SetAccessKeys(upstreamKey, ourKey)
	running, err := fake.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = running.Close() })
	sim, err := vcsim.Start(ctx, vcsim.Options{VMs: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Close)
	vs := vcsim.NewBackend("onprem", sim)

	// Every Node deletion, from before anything runs.
	w, err := c.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var deleted []string
	go func() {
		for ev := range w.ResultChan() {
			if n, ok := ev.Object.(*corev1.Node); ok && ev.Type == watch.Deleted {
				mu.Lock()
				deleted = append(deleted, n.Name)
				mu.Unlock()
			}
		}
	}()
	t.Cleanup(w.Stop)

	startUpstream(t, cp, bin, upstreamCloudConfig(running.URL, seeded.VPCID, seeded.PrivateSubnets[0]))
	// A Service of our class as an earlier version of ours left it: the
	// shared finalizer, our record, its bare-metal address. Upstream runs
	// beside it before ours starts.
	legacy := createLegacy(ctx, t, c)
	cp.StartCCMT(t, framework.CCMOptions{
		Name:        "ours",
		CloudConfig: fmt.Sprintf(besideConfig, running.URL, seeded.VPCID, vs.YAML()),
		Env:         append(vs.Env(), "TWOCCM_AWS_ACCESS_KEY_ID="+ourKey, "TWOCCM_AWS_SECRET_ACCESS_KEY=secret"),
	})
	ccmsUp := time.Now()

	awsNode := func(in awsfake.Instance) func(*corev1.Node) string {
		return func(n *corev1.Node) string {
			if n.Spec.ProviderID != "aws:///"+in.Zone+"/"+in.ID || n.Labels[corev1.LabelTopologyZone] != in.Zone ||
				n.Labels[corev1.LabelInstanceTypeStable] != in.InstanceType || !hasAddr(n, in.PrivateIPs[0]) || !hasAddr(n, in.PrivateDNSName) {
				return fmt.Sprintf("want upstream's providerID aws:///%s/%s, zone and type labels and addresses %s, %s", in.Zone, in.ID, in.PrivateIPs[0], in.PrivateDNSName)
			}
			if _, ok := n.Labels[backendLabel]; ok {
				return "carries our " + backendLabel + " label"
			}
			if _, ok := n.Labels[platformLbl]; ok {
				return "carries our " + platformLbl + " label"
			}
			return ""
		}
	}
	vsNode := func(v vcsim.VM) func(*corev1.Node) string {
		return func(n *corev1.Node) string {
			if n.Spec.ProviderID != v.ProviderID() || n.Labels[corev1.LabelTopologyZone] != v.Zone || !hasAddr(n, v.IP) ||
				n.Labels[backendLabel] != "onprem" || n.Labels[platformLbl] != "vsphere" {
				return fmt.Sprintf("want our providerID %s, zone %s, address %s, labels %s=onprem and %s=vsphere", v.ProviderID(), v.Zone, v.IP, backendLabel, platformLbl)
			}
			return ""
		}
	}
	bmNode := func(name, ip string) func(*corev1.Node) string {
		return func(n *corev1.Node) string {
			if n.Spec.ProviderID != "baremetal://"+name || !hasAddr(n, ip) || n.Labels[backendLabel] != "metal" || n.Labels[platformLbl] != "baremetal" {
				return fmt.Sprintf("want our providerID baremetal://%s, address %s, labels %s=metal and %s=baremetal", name, ip, backendLabel, platformLbl)
			}
			return ""
		}
	}
	a0, a1 := seeded.Instances[0], seeded.Instances[1]
	v0, v1 := sim.VMs[0], sim.VMs[1]
	waves := [][]twoNode{{
		{a0.PrivateDNSName, upstreamManager, []framework.NodeTweak{framework.WithProviderID("aws:///" + a0.Zone + "/" + a0.ID)}, awsNode(a0)},
		{v0.Name, ourManager, []framework.NodeTweak{framework.WithProviderID(v0.ProviderID())}, vsNode(v0)},
		{"bm-1", ourManager, []framework.NodeTweak{framework.WithProviderID("baremetal://bm-1")}, bmNode("bm-1", "10.0.0.11")},
	}, {
		// Without providerIDs: upstream finds its instance by the node's
		// name (its private DNS name), ours by the VM's and the
		// inventory's name.
		{a1.PrivateDNSName, upstreamManager, []framework.NodeTweak{func(n *corev1.Node) { n.Annotations = map[string]string{platformAnn: "aws"} }}, awsNode(a1)},
		{v1.Name, ourManager, nil, vsNode(v1)},
		{"bm-2", ourManager, nil, bmNode("bm-2", "10.0.0.12")},
	}}

	// The Services, before the nodes: each is served as its nodes come.
	classless := framework.NewLoadBalancerService(twoNS, "web-aws", framework.WithAnnotation("service.beta.kubernetes.io/aws-load-balancer-type", "nlb"))
	classed := framework.NewLoadBalancerService(twoNS, "web-metal", framework.WithLoadBalancerClass(metalClass))
	for _, s := range []*corev1.Service{classless, classed} {
		if _, err := framework.CreateService(ctx, c, s); err != nil {
			t.Fatal(err)
		}
	}

	var all []twoNode
	for i, wave := range waves {
		for _, n := range wave {
			if _, err := framework.CreateNode(ctx, c, framework.NewNode(n.name, n.tweaks...)); err != nil {
				t.Fatal(err)
			}
		}
		all = append(all, wave...)
		for _, n := range all {
			framework.Eventually(t, twoSettle, fmt.Sprintf("wave %d: node %s initialised by %s", i+1, n.name, n.owner), framework.NodeMatches(c, n.name, func(node *corev1.Node) (bool, string) {
				if framework.HasTaint(node, framework.UninitializedTaint) {
					return false, "still tainted uninitialised"
				}
				if msg := n.check(node); msg != "" {
					return false, fmt.Sprintf("%s: providerID %q labels %v addresses %v", msg, node.Spec.ProviderID, node.Labels, node.Status.Addresses)
				}
				return true, ""
			}))
		}
	}
	initialised := time.Now()

	// The kubelets lose the API server: every node NotReady, for long
	// enough that both node-lifecycle controllers (monitor period 1 s) look
	// at every node several times; then Ready again.
	for _, n := range all {
		if err := framework.SetNodeReady(ctx, c, n.name, corev1.ConditionFalse); err != nil {
			t.Fatal(err)
		}
	}
	framework.Consistently(t, 8*time.Second, "no node deleted while NotReady", func(context.Context) (bool, string, error) {
		mu.Lock()
		defer mu.Unlock()
		return len(deleted) == 0, fmt.Sprintf("deleted %v", deleted), nil
	})
	for _, n := range all {
		if err := framework.SetNodeReady(ctx, c, n.name, corev1.ConditionTrue); err != nil {
			t.Fatal(err)
		}
	}

	// The Services: upstream's NLB for the classless one, a bare-metal
	// address for ours.
	var nlbDNS string
	framework.Eventually(t, twoSettle, "upstream's NLB for the classless Service", framework.ServiceMatches(c, twoNS, classless.Name, func(s *corev1.Service) (bool, string) {
		lbs := running.LoadBalancers()
		if len(lbs) != 1 || len(s.Status.LoadBalancer.Ingress) != 1 || s.Status.LoadBalancer.Ingress[0].Hostname != lbs[0].DNSName {
			return false, fmt.Sprintf("status %v, NLBs in the fake %v", s.Status.LoadBalancer.Ingress, lbs)
		}
		nlbDNS = lbs[0].DNSName
		var targets []string
		for _, tg := range running.TargetGroups() {
			targets = append(targets, tg.Targets...)
		}
		has := func(id string) bool {
			return slices.ContainsFunc(targets, func(t string) bool { return strings.HasPrefix(t, id+":") })
		}
		return has(a0.ID) && has(a1.ID), fmt.Sprintf("NLB targets %v; want both instances", targets)
	}))
	framework.Eventually(t, twoSettle, "a bare-metal address for the classed Service", framework.ServiceMatches(c, twoNS, classed.Name, func(s *corev1.Service) (bool, string) {
		ips := framework.IngressIPs(s)
		return len(ips) == 1 && strings.HasPrefix(ips[0], "192.0.2."), fmt.Sprintf("status %v", s.Status.LoadBalancer.Ingress)
	}))
	// The NLB targets upstream's instances and nothing else (upstream
	// passes over the nodes whose providerID is not AWS's).
	for _, tg := range running.TargetGroups() {
		for _, target := range tg.Targets {
			if !strings.HasPrefix(target, a0.ID+":") && !strings.HasPrefix(target, a1.ID+":") {
				t.Errorf("NLB target group %s targets %s, not one of upstream's instances", tg.Name, target)
			}
		}
	}

	// The earlier version's Service: moved to our finalizer in one write
	// (never neither), its address kept.
	framework.Eventually(t, twoSettle, "the legacy Service under our finalizer alone, its address kept", framework.ServiceMatches(c, twoNS, legacy.Name, func(s *corev1.Service) (bool, string) {
		ips := framework.IngressIPs(s)
		return slices.Equal(s.Finalizers, []string{ourFinalizer}) && slices.Equal(ips, []string{legacyIP}), fmt.Sprintf("finalizers %v, status %v", s.Finalizers, ips)
	}))

	// A quiet spell with everything settled, for late writes and events
	// (both CCMs' node status sync runs every 5 s).
	framework.Consistently(t, 10*time.Second, "nothing changes hands", func(context.Context) (bool, string, error) {
		mu.Lock()
		defer mu.Unlock()
		return len(deleted) == 0, fmt.Sprintf("deleted %v", deleted), nil
	})

	// Who wrote what.
	other := map[string]string{upstreamManager: ourManager, ourManager: upstreamManager}
	owners := map[string]string{}
	for _, n := range all {
		node, err := c.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("node %s: %v", n.name, err)
		}
		owners["Node/"+n.name] = n.owner
		m := managers(node)
		if !slices.Contains(m, n.owner) || slices.Contains(m, other[n.owner]) {
			t.Errorf("node %s written by %v; want %s and never %s", n.name, m, n.owner, other[n.owner])
		}
		if framework.HasTaint(node, framework.UninitializedTaint) {
			t.Errorf("node %s still tainted uninitialised", n.name)
		}
		if msg := n.check(node); msg != "" {
			t.Errorf("node %s: %s", n.name, msg)
		}
	}
	for name, owner := range map[string]string{classless.Name: upstreamManager, classed.Name: ourManager, legacy.Name: ourManager} {
		s, err := c.CoreV1().Services(twoNS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		owners["Service/"+name] = owner
		if m := managers(s); !slices.Contains(m, owner) || slices.Contains(m, other[owner]) {
			t.Errorf("Service %s written by %v; want %s and never %s", name, m, owner, other[owner])
		}
	}
	if lbs := running.LoadBalancers(); len(lbs) != 1 || lbs[0].DNSName != nlbDNS {
		t.Errorf("NLBs in the fake %v; want upstream's one (%s) only", lbs, nlbDNS)
	}
	toClusterIP(ctx, t, c, legacy.Name)
	deleteBoth(ctx, t, c, running, map[string]string{classless.Name: sharedFinalizer, classed.Name: ourFinalizer})
	deletedAt := time.Now()

	events, err := c.CoreV1().Events("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, e := range events.Items {
		key := e.InvolvedObject.Kind + "/" + e.InvolvedObject.Name
		owner, ok := owners[key]
		if !ok {
			continue
		}
		m := managers(&e)
		seen[key+" by "+strings.Join(m, ",")]++
		if slices.Contains(m, other[owner]) {
			t.Errorf("event on %s (owned by %s) from %v (reporting controller %q, source %q): %s %s: %s", key, owner, m,
				e.ReportingController, e.Source.Component, e.Type, e.Reason, e.Message)
		}
	}
	mu.Lock()
	if len(deleted) != 0 {
		t.Errorf("nodes deleted: %v", deleted)
	}
	mu.Unlock()
	t.Logf("events per object and writer: %v", seen)
	t.Logf("timings: upstream binary %s, CCMs up %s, nodes initialised %s, whole test %s (the deletions done %s before its end)",
		built.Sub(started).Round(time.Millisecond), ccmsUp.Sub(built).Round(time.Millisecond),
		initialised.Sub(ccmsUp).Round(time.Millisecond), time.Since(started).Round(time.Millisecond), time.Since(deletedAt).Round(time.Millisecond))
}

// legacyIP is the legacy Service's address, in twoMetalPool.
const legacyIP = "192.0.2.9"

// createLegacy creates a Service of our class as a version of ours from
// before pkg/lbcontroller.Finalizer left it: the shared cleanup
// finalizer, the router's record naming metal, and metal's address
// legacyIP in its status.
func createLegacy(ctx context.Context, t *testing.T, c kubernetes.Interface) *corev1.Service {
	t.Helper()
	svc := framework.NewLoadBalancerService(twoNS, "web-legacy", framework.WithLoadBalancerClass(metalClass), func(s *corev1.Service) {
		s.Finalizers = []string{sharedFinalizer}
		s.Annotations["multicloud-ccm.io/load-balancer-backends"] = "metal"
		s.Annotations["multicloud-ccm.io/load-balancer-served-by"] = "metal"
	})
	created, err := framework.CreateService(ctx, c, svc)
	if err != nil {
		t.Fatal(err)
	}
	created.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: legacyIP}}
	out, err := c.CoreV1().Services(twoNS).UpdateStatus(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// toClusterIP turns the Service into a ClusterIP one, whose class the API
// server then drops: ours must delete its load balancer and remove our
// finalizer (upstream, which never saw ours, must not act), after which
// it is deleted at once.
func toClusterIP(ctx context.Context, t *testing.T, c kubernetes.Interface, name string) {
	t.Helper()
	// The API server drops the node port and the class with the type.
	patch := []byte(`{"spec":{"type":"ClusterIP"}}`)
	if _, err := c.CoreV1().Services(twoNS).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, twoSettle, "Service "+name+", now ClusterIP, without class, address or finalizer", framework.ServiceMatches(c, twoNS, name, func(s *corev1.Service) (bool, string) {
		return len(s.Finalizers) == 0 && s.Spec.LoadBalancerClass == nil && len(s.Status.LoadBalancer.Ingress) == 0,
			fmt.Sprintf("finalizers %v, class %v, status %v", s.Finalizers, s.Spec.LoadBalancerClass, s.Status.LoadBalancer.Ingress)
	}))
	if err := c.CoreV1().Services(twoNS).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, twoSettle, "Service "+name+" deleted", framework.ServiceGone(c, twoNS, name))
}

// The cleanup finalizers: upstream's on classless Services, ours on the
// Services of our classes (pkg/lbcontroller.Finalizer).
const (
	sharedFinalizer = "service.kubernetes.io/load-balancer-cleanup"
	ourFinalizer    = "multicloud-ccm.io/load-balancer-cleanup"
)

// deleteBoth deletes the Services, each of which must carry exactly the
// cleanup finalizer finalizers names for it, and waits until they are
// gone and upstream's NLB and target groups with them. From the deletion
// on, the fake refuses our access key: our aws backend is never asked
// about upstream's NLB (a refused call is counted).
func deleteBoth(ctx context.Context, t *testing.T, c kubernetes.Interface, running *awsfake.Running, finalizers map[string]string) {
	t.Helper()
	for name, want := range finalizers {
		s, err := c.CoreV1().Services(twoNS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(s.Finalizers, []string{want}) {
			t.Errorf("Service %s carries finalizers %v; want %s only", name, s.Finalizers, want)
		}
	}
	rejected := running.Rejected()
	running.SetAccessKeys(upstreamKey)
	for name := range finalizers {
		if err := c.CoreV1().Services(twoNS).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for name := range finalizers {
		framework.Eventually(t, twoSettle, "Service "+name+" deleted (its finalizer removed)", framework.ServiceGone(c, twoNS, name))
	}
	framework.Eventually(t, twoSettle, "upstream's NLB and target groups deleted", func(context.Context) (bool, string, error) {
		lbs, tgs := running.LoadBalancers(), running.TargetGroups()
		return len(lbs) == 0 && len(tgs) == 0, fmt.Sprintf("NLBs %v, target groups %v", lbs, tgs), nil
	})
	if n := running.Rejected() - rejected; n != 0 {
		t.Errorf("%d AWS calls with our key during the deletions; want none (upstream's NLB is not ours to ask about)", n)
	}
}
