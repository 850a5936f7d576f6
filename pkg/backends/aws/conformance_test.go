package aws

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"
	corev1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/multicloud-ccm/multicloud-ccm/internal/awsfake"
	"github.com/multicloud-ccm/multicloud-ccm/internal/backendtest"
	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
)

// TestConformance runs the backend contract against the awsfake wire fake
// (real SDK clients over HTTP), one fake per clause.
func TestConformance(t *testing.T) {
	backendtest.Run(t, newConformanceFixture)
}

// TestConformanceTargetGroupNotFound runs the load-balancer clauses (the
// crashes between steps among them) against a fake that answers
// DescribeTargetGroups(LoadBalancerArn) for an NLB without target groups
// with TargetGroupNotFound instead of an empty list, as AWS may: a crash
// after the NLB exists but before its first listener must not leave the
// Service stuck.
func TestConformanceTargetGroupNotFound(t *testing.T) {
	backendtest.Run(t, func(t *testing.T) *backendtest.Fixture {
		f, e := conformanceFixture(t)
		e.fake.SetNoTargetGroupsNotFound(true)
		f.Instances = nil // the switch is the load balancers'.
		return f
	})
}

// conformance is one clause's fake and the instances its hooks created.
type conformance struct {
	e *env

	mu    sync.Mutex
	n     int
	nodes []*corev1.Node
	// nodeSG is the cluster's node security group the strangers hook made.
	nodeSG string
}

func newConformanceFixture(t *testing.T) *backendtest.Fixture {
	f, _ := conformanceFixture(t)
	return f
}

// conformanceFixture is the fixture and its fake.
func conformanceFixture(t *testing.T) (*backendtest.Fixture, *env) {
	e := newEnv(t, fastCache, noBudget)
	cfg := e.cloud.instances.cache.snaps.Config()
	cfg.MissInterval = 50 * time.Millisecond
	e.cloud.instances.cache.configure(cfg)
	c := &conformance{e: e}
	return &backendtest.Fixture{
		Cloud:  e.cloud,
		Settle: 5 * time.Second,
		Type:   Type,
		Instances: &backendtest.InstanceHooks{
			Running:  func(*testing.T) *corev1.Node { return c.initialised(c.running()) },
			Gone:     func(t *testing.T, n *corev1.Node) { c.setState(t, n, "terminated") },
			PowerOff: func(t *testing.T, n *corev1.Node) { c.setState(t, n, "stopped") },
			PowerOn:  func(t *testing.T, n *corev1.Node) { c.setState(t, n, "running") },
			Outage: func(*testing.T) func() {
				e.fake.SetOutage(true)
				return func() { e.fake.SetOutage(false) }
			},
			Throttle: func(*testing.T) func() {
				e.fake.Throttle(1 << 30)
				return func() { e.fake.Throttle(0) }
			},
			Refuse: func(*testing.T) func() {
				e.fake.SetAccessKeys("AKIDANOTHERKEY") // the backend's key deactivated
				return func() { e.fake.SetAccessKeys() }
			},
			Absent:  func(t *testing.T) string { return providerID(testRegion+"a", randomInstanceID(t)) },
			Foreign: c.foreign,
			Malformed: []string{
				"aws:///eu-west-1a/vol-0123456789abcdef0",
				"aws:///eu-west-1a/",
				"aws:///eu-west-1a/i-0123456789abcdef0/",
				"aws:///a/b/i-0123456789abcdef0",
				"aws:///eu-west-1a/i-0123456789abcdef0?x=1",
				"aws:///eu west/i-0123456789abcdef0",
				"aws://",
			},
			StrongMatch: c.strongMatch,
			WeakMatch:   c.weakMatch,
		},
		LoadBalancers: &backendtest.LoadBalancerHooks{
			Service:   c.service,
			Nodes:     c.lbNodes,
			Mutations: func() int { return len(e.fake.MutatingCalls()) },
			FailMutationsAfter: func(_ *testing.T, n int) func() {
				e.fake.FailMutationsAfter(n)
				return e.fake.ClearMutationFailures
			},
			Parts:     c.parts,
			Strangers: c.strangers,
			Variants:  c.variants,
		},
	}, e
}

// running adds a new running instance of the VPC.
func (c *conformance) running() awsfake.Instance {
	c.mu.Lock()
	c.n++
	n := c.n
	c.mu.Unlock()
	return c.e.addInstance(n)
}

// initialised is the instance's Node as the upstream node controller leaves
// it: providerID, addresses and the labels InstanceMetadata gives.
func (c *conformance) initialised(in awsfake.Instance) *corev1.Node {
	return newNode(in.PrivateDNSName, testutil.WithProviderID(providerID(in.Zone, in.ID)), testutil.WithInternalIP(in.PrivateIPs[0]),
		testutil.WithAddress(corev1.NodeInternalDNS, in.PrivateDNSName), testutil.WithAddress(corev1.NodeHostName, in.PrivateDNSName),
		testutil.WithLabel(corev1.LabelTopologyRegion, testRegion), testutil.WithLabel(corev1.LabelTopologyZone, in.Zone),
		testutil.WithLabel(corev1.LabelInstanceTypeStable, in.InstanceType), testutil.WithLabel(ZoneIDLabel, in.ZoneID),
		testutil.WithLabel(string(annotation.NodeBackend), "aws-1"))
}

func (c *conformance) setState(t *testing.T, n *corev1.Node, state string) {
	t.Helper()
	id, err := parseProviderID(n.Spec.ProviderID)
	if err != nil {
		t.Fatal(err)
	}
	c.e.fake.SetInstanceState(id, state)
}

// foreign names zones of other regions (an Availability Zone, a Local
// Zone, the aws://<zone>/<id> form), once with the ID of an instance that
// runs here: EC2 instance IDs are unique per region only.
func (c *conformance) foreign(t *testing.T) []string {
	here := c.running()
	return []string{
		providerID("us-east-1a", randomInstanceID(t)),
		providerID("us-west-2-lax-1a", randomInstanceID(t)),
		"aws://ap-southeast-2b/" + randomInstanceID(t),
		providerID("us-east-1b", here.ID),
	}
}

// strongMatch is a kubelet's node of a running instance, named by its
// private DNS name, with no providerID yet.
func (c *conformance) strongMatch(*testing.T) *corev1.Node {
	in := c.running()
	return newNode(in.PrivateDNSName, testutil.WithInternalIP(in.PrivateIPs[0]), testutil.WithAddress(corev1.NodeHostName, in.PrivateDNSName))
}

// weakMatch shares a running instance's address, but its name is the
// private DNS name of another region's instance. It waits out the cache's
// miss interval, so that the backend does see the instance.
func (c *conformance) weakMatch(*testing.T) *corev1.Node {
	in := c.running()
	time.Sleep(2 * c.e.cloud.instances.cache.snaps.Config().MissInterval)
	name := strings.Replace(in.PrivateDNSName, testRegion, "us-east-1", 1)
	return newNode(name, testutil.WithInternalIP(in.PrivateIPs[0]), testutil.WithAddress(corev1.NodeHostName, name))
}

func randomInstanceID(t *testing.T) string {
	b := make([]byte, 9)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "i-" + hex.EncodeToString(b)[:17]
}

// service returns a new Service with two ports, one TCP and UDP.
func (c *conformance) service(*testing.T) *corev1.Service {
	c.mu.Lock()
	c.n++
	n := c.n
	c.mu.Unlock()
	return newService(fmt.Sprintf("svc-%d", n), withPort("dns", corev1.ProtocolTCP, 53, 30053), withPort("dns-udp", corev1.ProtocolUDP, 53, 30053))
}

// lbNodes are the same nodes on every call: two instances of the VPC and a
// vSphere VM linked to it, so the targets are IP targets.
func (c *conformance) lbNodes(*testing.T) []*corev1.Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.nodes == nil {
		c.nodes = append(c.e.awsNodes(1000, 2), otherNodes(1)...)
	}
	return c.nodes
}

// parts counts what AWS holds for the Service: its NLB and listeners, its
// target groups and their targets (draining ones too), its security group
// and rules.
func (c *conformance) parts(_ *testing.T, svc *corev1.Service) (loadBalancers, parts int) {
	n := namesFor(testCluster, svc)
	for _, lb := range c.e.fake.LoadBalancers() {
		if lb.Name == n.lb {
			loadBalancers++
			parts += 1 + len(lb.Listeners)
		}
	}
	for _, tg := range c.e.fake.TargetGroups() {
		if strings.HasPrefix(tg.Name, n.tgPrefix()) {
			parts += 1 + len(tg.Targets) + len(tg.Draining)
		}
	}
	for _, sg := range c.e.fake.SecurityGroups() {
		if sg.Name == n.sg {
			parts += 1 + len(sg.Ingress)
		}
	}
	return loadBalancers, parts
}

// strangers makes, beside the Service's NLB, what an operator or another
// tool would: hand-made (untagged) listeners on our NLB, one (port 9999)
// forwarding to a hand-made, untagged target group, one (port 9998) to
// the Service's own target group; the cluster's node security group as
// eksctl or kops make it (tagged kubernetes.io/cluster/<id>=owned, a
// node-to-node rule) and a control-plane group allowing the nodes in;
// another cluster's NLB with the name the upstream provider would give
// this Service and the Service's tag, with a listener and target group of
// its own. The fingerprint covers the hand-made listeners (until the
// delete takes them with the NLB), the hand-made target groups (settings,
// attributes, targets, tags), both groups with their rules, and the other
// cluster's NLB with its listeners and attributes.
func (c *conformance) strangers(t *testing.T, svc *corev1.Service) func(t *testing.T) string {
	e, ctx := c.e, context.Background()
	var ours string
	for _, lb := range e.fake.LoadBalancers() {
		if lb.Name == namesFor(testCluster, svc).lb {
			ours = lb.ARN
		}
	}
	if ours == "" {
		t.Fatalf("no NLB of %s", svc.Name)
	}
	tg := handMadeTG(t, e, ours, 9999)
	for _, g := range e.fake.TargetGroups() {
		if strings.HasPrefix(g.Name, namesFor(testCluster, svc).tgPrefix()) {
			handMadeListener(t, e, ours, 9998, g.ARN)
			break
		}
	}
	if _, err := e.cloud.lb.elb.RegisterTargets(ctx, &elbv2.RegisterTargetsInput{TargetGroupArn: awssdk.String(tg),
		Targets: []elbtypes.TargetDescription{{Id: awssdk.String("10.0.10.200"), Port: awssdk.Int32(9000)}}}); err != nil {
		t.Fatal(err)
	}
	nodeSG, groups := clusterNodeSG(t, e)
	c.mu.Lock()
	c.nodeSG = nodeSG
	c.mu.Unlock()
	other, err := e.cloud.lb.elb.CreateLoadBalancer(ctx, &elbv2.CreateLoadBalancerInput{Name: awssdk.String(cloudprovider.DefaultLoadBalancerName(svc)),
		Type: elbtypes.LoadBalancerTypeEnumNetwork, Subnets: []string{"subnet-0a"}, SecurityGroups: []string{nodeSG},
		Tags: []elbtypes.Tag{{Key: awssdk.String(tagService), Value: awssdk.String(svc.Namespace + "/" + svc.Name)},
			{Key: awssdk.String(tagClusterPrefix + "other"), Value: awssdk.String("owned")}}})
	if err != nil {
		t.Fatal(err)
	}
	otherARN := awssdk.ToString(other.LoadBalancers[0].LoadBalancerArn)
	otherTG := handMadeTG(t, e, otherARN, 53)
	return func(*testing.T) string {
		var b strings.Builder
		for _, g := range e.fake.TargetGroups() {
			if g.ARN == tg || g.ARN == otherTG {
				fmt.Fprintf(&b, "target group %+v\n", g)
			}
		}
		tags, err := e.cloud.lb.elb.DescribeTags(ctx, &elbv2.DescribeTagsInput{ResourceArns: []string{tg, otherTG}})
		if err == nil {
			fmt.Fprintf(&b, "its tags %v\n", tagMaps(tags))
		}
		for _, lb := range e.fake.LoadBalancers() {
			if lb.ARN == otherARN {
				fmt.Fprintf(&b, "other cluster's NLB %+v\n", lb)
			}
			for _, ls := range lb.Listeners {
				if lb.ARN == ours && (strings.HasPrefix(ls, "TCP:9999->") || strings.Contains(ls, ":9998->")) {
					fmt.Fprintf(&b, "%shand-made listener %s\n", backendtest.InsideLoadBalancer, ls)
				}
			}
		}
		fmt.Fprintf(&b, "groups %s", groups())
		return b.String()
	}
}

// variants are annotation edits the backend honours, applied in turn:
// health-check settings, source ranges, the cluster's node group as an
// extra security group and then not, additional tags, a target-group
// attribute.
func (c *conformance) variants(_ *testing.T, svc *corev1.Service) []*corev1.Service {
	c.mu.Lock()
	nodeSG := c.nodeSG
	c.mu.Unlock()
	var out []*corev1.Service
	next := func(change func(*corev1.Service)) {
		v := svc.DeepCopy()
		if len(out) > 0 {
			v = out[len(out)-1].DeepCopy()
		}
		change(v)
		out = append(out, v)
	}
	set := func(n annotation.Name, val string) func(*corev1.Service) {
		return func(s *corev1.Service) { s.Annotations[string(n)] = val }
	}
	next(func(s *corev1.Service) {
		set(AnnotationHealthCheckInterval, "10")(s)
		set(AnnotationHealthyThreshold, "2")(s)
	})
	next(func(s *corev1.Service) {
		s.Spec.LoadBalancerSourceRanges = []string{"203.0.113.0/24", "198.51.100.0/24"}
	})
	next(set(AnnotationExtraSecurityGroups, nodeSG))
	next(func(s *corev1.Service) { delete(s.Annotations, string(AnnotationExtraSecurityGroups)) })
	next(set(AnnotationAdditionalTags, "team=web,cost-center=42"))
	next(set(AnnotationTargetGroupAttributes, "deregistration_delay.timeout_seconds=30"))
	return out
}
