package aws

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	cloudprovider "k8s.io/cloud-provider"
	cloudproviderapi "k8s.io/cloud-provider/api"
	routecontroller "k8s.io/cloud-provider/controllers/route"
	controllersmetrics "k8s.io/component-base/metrics/prometheus/controllers"
	_ "k8s.io/controller-manager/pkg/features/register" // the route controller reads its feature gates.

	"github.com/multicloud-ccm/multicloud-ccm/internal/awsfake"
	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// runNodeControllers runs the upstream cloud-node and cloud-node-lifecycle
// controllers against the backend over a fake clientset holding nodes.
func runNodeControllers(t *testing.T, c *Cloud, nodes ...*corev1.Node) *fake.Clientset {
	t.Helper()
	return testutil.RunNodeControllers(t, c, 200*time.Millisecond, nodes...)
}

// kubeletNode is a node as a kubelet with --cloud-provider=external
// registers it: tainted uninitialized and not ready.
func kubeletNode(name string, tweaks ...nodeTweak) *corev1.Node {
	base := []nodeTweak{func(n *corev1.Node) {
		n.Spec.Taints = []corev1.Taint{{Key: cloudproviderapi.TaintExternalCloudProvider, Value: "true", Effect: corev1.TaintEffectNoSchedule}}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown}}
	}}
	return newNode(name, append(base, tweaks...)...)
}

func getNode(t *testing.T, client *fake.Clientset, name string) (*corev1.Node, bool) {
	t.Helper()
	return testutil.GetNode(t, client, name)
}

// eventually polls cond for up to 30 s.
func eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, what, cond)
}

func hasTaint(n *corev1.Node, key string) bool {
	for _, tn := range n.Spec.Taints {
		if tn.Key == key {
			return true
		}
	}
	return false
}

func fastCache(s *Settings) { s.InstanceCacheTTL = &metav1.Duration{Duration: 100 * time.Millisecond} }

func TestNodeControllers(t *testing.T) {
	e := newEnv(t, fastCache)
	byDNS := e.addInstance(1)
	byName := e.addInstance(2)
	stopped := e.addInstance(3)
	gone := e.addInstance(4)
	client := runNodeControllers(t, e.cloud,
		kubeletNode(byDNS.PrivateDNSName),
		kubeletNode(byName.ID),
		newNode("stopped", testutil.NotReady, testutil.WithProviderID(providerID(stopped.Zone, stopped.ID))),
		newNode("gone", testutil.NotReady, testutil.WithProviderID(providerID(gone.Zone, gone.ID))),
		newNode("ready", testutil.WithProviderID(providerID(gone.Zone, gone.ID))),
	)

	for _, in := range []awsfake.Instance{byDNS, byName} {
		name := in.PrivateDNSName
		if in.ID == byName.ID {
			name = in.ID
		}
		eventually(t, "node "+name+" initialised", func() error {
			n, _ := getNode(t, client, name)
			if n == nil || hasTaint(n, cloudproviderapi.TaintExternalCloudProvider) {
				return fmt.Errorf("still tainted: %+v", n)
			}
			if n.Spec.ProviderID != providerID(in.Zone, in.ID) || n.Labels[corev1.LabelTopologyZone] != in.Zone ||
				n.Labels[corev1.LabelTopologyRegion] != testRegion || n.Labels[corev1.LabelInstanceTypeStable] != "m5.large" || n.Labels[ZoneIDLabel] != in.ZoneID {
				return fmt.Errorf("providerID %q labels %v", n.Spec.ProviderID, n.Labels)
			}
			if len(n.Status.Addresses) == 0 || n.Status.Addresses[0].Address != in.PrivateIPs[0] {
				return fmt.Errorf("addresses %v", n.Status.Addresses)
			}
			return nil
		})
	}

	e.fake.SetInstanceState(stopped.ID, "stopped")
	eventually(t, "stopped node tainted shutdown", func() error {
		if n, _ := getNode(t, client, "stopped"); n == nil || !hasTaint(n, cloudproviderapi.TaintNodeShutdown) {
			return fmt.Errorf("not tainted: %+v", n)
		}
		return nil
	})

	e.fake.SetOutage(true)
	e.fake.SetInstanceState(gone.ID, "terminated")
	time.Sleep(time.Second)
	if _, ok := getNode(t, client, "gone"); !ok {
		t.Fatal("node deleted during an outage")
	}
	e.fake.SetOutage(false)
	eventually(t, "terminated node deleted", func() error {
		if _, ok := getNode(t, client, "gone"); ok {
			return fmt.Errorf("still there")
		}
		return nil
	})
	if _, ok := getNode(t, client, "stopped"); !ok {
		t.Error("stopped node deleted")
	}
}

// runServiceController runs the upstream service controller against the
// backend over client until the test ends.
func runServiceController(t *testing.T, c *Cloud, client *fake.Clientset) {
	t.Helper()
	startServiceController(t, c, client)
}

// startServiceController starts the upstream service controller and
// returns the function that stops it (a crash, as far as AWS can tell).
func startServiceController(t *testing.T, c *Cloud, client *fake.Clientset) (stop func()) {
	t.Helper()
	return testutil.StartServiceController(t, c, client, testCluster, 2)
}

// TestServiceControllerCrashBeforeStatus: the CCM creates the NLB and dies
// before the Service's status is written (every status write fails, then
// the controller stops). A restarted CCM (a new backend, a new controller)
// finds the NLB by its name and tags: exactly one NLB, and the status gets
// its DNS name.
//
// Nodes are added only once the Service is handled: the upstream controller
// reads its service cache during a node sync without a lock (a data race
// the race detector reports when a node sync and a service sync overlap).
func TestServiceControllerCrashBeforeStatus(t *testing.T) {
	e := newEnv(t)
	client := testutil.NewClientset()
	ctx := context.Background()
	var crashed atomic.Bool
	var statusWrites atomic.Int32
	crashed.Store(true)
	client.PrependReactor("patch", "services", func(a k8stesting.Action) (bool, runtime.Object, error) {
		// The controller patches the finalizer and the status through the
		// status subresource; only the status (with the ingress) fails.
		p, ok := a.(k8stesting.PatchAction)
		if ok && crashed.Load() && strings.Contains(string(p.GetPatch()), "ingress") {
			statusWrites.Add(1)
			return true, nil, fmt.Errorf("connection reset by peer (the CCM is crashing)")
		}
		return false, nil, nil
	})
	stop := startServiceController(t, e.cloud, client)
	if _, err := client.CoreV1().Services("default").Create(ctx, newService("web"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "NLB created, status write failed", func() error {
		if len(e.fake.LoadBalancers()) != 1 || statusWrites.Load() == 0 {
			return fmt.Errorf("%d load balancers, %d status writes", len(e.fake.LoadBalancers()), statusWrites.Load())
		}
		return nil
	})
	stop()
	crashed.Store(false)

	restarted := buildCloud(t, e.url)
	runServiceController(t, restarted, client)
	eventually(t, "the restarted CCM writes the NLB's DNS name", func() error {
		s, err := client.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil || len(s.Status.LoadBalancer.Ingress) == 0 {
			return fmt.Errorf("no ingress yet (%w)", err)
		}
		if lbs := e.fake.LoadBalancers(); len(lbs) != 1 || s.Status.LoadBalancer.Ingress[0].Hostname != lbs[0].DNSName {
			return fmt.Errorf("ingress %v, load balancers %+v", s.Status.LoadBalancer.Ingress, lbs)
		}
		return nil
	})
	if n := e.fake.Calls("CreateLoadBalancer"); n != 1 {
		t.Errorf("CreateLoadBalancer calls = %d, want 1", n)
	}
	if len(e.fake.TargetGroups()) != 1 || e.fake.SecurityGroupCount() != 1 {
		t.Errorf("%d target groups, %d security groups; want 1 and 1", len(e.fake.TargetGroups()), e.fake.SecurityGroupCount())
	}
	createNodes(t, client, e.awsNodes(1, 2)...)
	eventually(t, "the nodes become targets", func() error {
		if tgs := e.fake.TargetGroups(); len(tgs) != 1 || len(tgs[0].Targets) != 2 {
			return fmt.Errorf("target groups %+v", tgs)
		}
		return nil
	})
}

// deleteService deletes a Service as a user would; its finalizer keeps it,
// marked for deletion, until the service controller has released it.
func deleteService(t *testing.T, client *fake.Clientset, name string) {
	t.Helper()
	if err := client.CoreV1().Services("default").Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

func createNodes(t *testing.T, client *fake.Clientset, nodes ...*corev1.Node) {
	t.Helper()
	for _, n := range nodes {
		if _, err := client.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestServiceControllerVSphereOnAWS is the mission's headline case: the
// cluster's nodes are vSphere VMs linked to the VPC (plus one EC2
// instance); a Service gets an NLB whose IP targets are exactly the nodes'
// addresses; adding a node registers a target; an outage deletes nothing;
// deleting the Service leaves nothing in AWS.
//
// The nodes join after the Service is handled (see
// TestServiceControllerCrashBeforeStatus for why).
func TestServiceControllerVSphereOnAWS(t *testing.T) {
	e := newEnv(t)
	nodes := append(otherNodes(2), e.awsNodes(1, 1)...)
	client := testutil.NewClientset()
	ctx := context.Background()
	runServiceController(t, e.cloud, client)
	svc := newService("web")
	if _, err := client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "Service gets the NLB's DNS name", func() error {
		s, err := client.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil || len(s.Status.LoadBalancer.Ingress) == 0 {
			return fmt.Errorf("no ingress yet (%w)", err)
		}
		if lbs := e.fake.LoadBalancers(); len(lbs) != 1 || s.Status.LoadBalancer.Ingress[0].Hostname != lbs[0].DNSName {
			return fmt.Errorf("ingress %v, load balancers %+v", s.Status.LoadBalancer.Ingress, lbs)
		}
		return nil
	})
	wantTargets := func(want string) func() error {
		return func() error {
			tgs := e.fake.TargetGroups()
			if len(tgs) != 1 || tgs[0].TargetType != targetIP || strings.Join(tgs[0].Targets, ",") != want {
				return fmt.Errorf("target groups %+v, want ip targets %s", tgs, want)
			}
			return nil
		}
	}
	createNodes(t, client, nodes...)
	eventually(t, "IP targets are the nodes' addresses", wantTargets("10.0.11.11:30080,192.168.10.1:30080@all,192.168.10.2:30080@all"))

	extra := newNode("vm-z", testutil.WithProviderID("vsphere://4201-z"), testutil.WithInternalIP("192.168.10.9"))
	if _, err := client.CoreV1().Nodes().Create(ctx, extra, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "new node registered", wantTargets("10.0.11.11:30080,192.168.10.1:30080@all,192.168.10.2:30080@all,192.168.10.9:30080@all"))

	before := e.fake.ResourceCount()
	e.fake.SetOutage(true)
	if err := client.CoreV1().Services("default").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if n := e.fake.ResourceCount(); n != before {
		t.Fatalf("resources changed during an outage: %d -> %d", before, n)
	}
	e.fake.SetOutage(false)
	eventually(t, "nothing left in AWS", func() error {
		if n := e.fake.ResourceCount(); n != 0 {
			return fmt.Errorf("%d resources left", n)
		}
		_, err := client.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("the Service is still there: %w", err)
	})
}

// TestRouteController runs the upstream route controller against the
// backend: each aws:// node's pod CIDR is routed to its instance in the
// cluster's tagged route table, with the instance's source/destination
// check off; a deleted node's route is removed; a route outside the
// cluster CIDR is left alone. Without a routes section no Routes are
// offered.
func TestRouteController(t *testing.T) {
	if _, ok := newEnv(t).cloud.Routes(); ok {
		t.Fatal("Routes offered without a routes section")
	}
	e := newEnv(t, func(s *Settings) { s.Routes = &RoutesSettings{} })
	a, b, nat := e.addInstance(1), e.addInstance(2), e.addInstance(3)
	e.fake.AddRouteTable(awsfake.RouteTable{ID: "rtb-0c1", VPCID: testVPC, Tags: map[string]string{tagClusterPrefix + testCluster: "owned"},
		Routes: []awsfake.Route{{DestinationCIDR: "0.0.0.0/0", InstanceID: nat.ID}}})
	e.fake.AddRouteTable(awsfake.RouteTable{ID: "rtb-0c2", VPCID: testVPC})
	withPodCIDR := func(cidr string) nodeTweak {
		return func(n *corev1.Node) { n.Spec.PodCIDR, n.Spec.PodCIDRs = cidr, []string{cidr} }
	}
	client := testutil.NewClientset(
		newNode("a", testutil.WithProviderID(providerID(a.Zone, a.ID)), withPodCIDR("10.244.1.0/24")),
		newNode("b", testutil.WithProviderID(providerID(b.Zone, b.ID)), withPodCIDR("10.244.2.0/24")))
	routes, _ := e.cloud.Routes()
	factory := informers.NewSharedInformerFactory(client, 0)
	e.cloud.SetInformers(factory)
	_, clusterCIDR, _ := net.ParseCIDR("10.244.0.0/16")
	rc, err := routecontroller.New(routes, client, factory.Core().V1().Nodes(), testCluster, []*net.IPNet{clusterCIDR})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	var wg sync.WaitGroup
	wg.Go(func() { rc.Run(ctx, 200*time.Millisecond, controllersmetrics.NewControllerManagerMetrics("test")) })
	t.Cleanup(func() { cancel(); wg.Wait(); factory.Shutdown() })

	table := func(want string) func() error {
		return func() error {
			rt, _ := e.fake.GetRouteTable("rtb-0c1")
			var got []string
			for _, r := range rt.Routes {
				got = append(got, r.DestinationCIDR+"->"+r.InstanceID)
			}
			sort.Strings(got)
			if strings.Join(got, ",") != want {
				return fmt.Errorf("routes %v, want %s", got, want)
			}
			return nil
		}
	}
	eventually(t, "pod CIDRs routed to the instances", table(fmt.Sprintf("0.0.0.0/0->%s,10.244.1.0/24->%s,10.244.2.0/24->%s", nat.ID, a.ID, b.ID)))
	for _, id := range []string{a.ID, b.ID} {
		if in, _ := e.fake.GetInstance(id); in.SourceDestCheck {
			t.Errorf("instance %s still checks source/destination", id)
		}
	}
	if in, _ := e.fake.GetInstance(nat.ID); !in.SourceDestCheck {
		t.Error("the NAT instance's source/destination check was changed")
	}
	if err := client.CoreV1().Nodes().Delete(ctx, "b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the deleted node's route removed", table(fmt.Sprintf("0.0.0.0/0->%s,10.244.1.0/24->%s", nat.ID, a.ID)))
	if rt, _ := e.fake.GetRouteTable("rtb-0c2"); len(rt.Routes) != 0 {
		t.Errorf("untagged route table changed: %v", rt.Routes)
	}
}

// TestForeignRegionNodeIsNeverDeleted runs the upstream node-lifecycle
// controller: a NotReady node whose providerID names a zone of another
// region (its backend removed from the config, say) stays, while a NotReady
// node of this region whose instance AWS says does not exist is deleted in
// the same sweeps.
func TestForeignRegionNodeIsNeverDeleted(t *testing.T) {
	e := newEnv(t, fastCache)
	client := runNodeControllers(t, e.cloud,
		newNode("us-east", testutil.NotReady, testutil.WithProviderID("aws:///us-east-1a/i-0123456789abcdef0")),
		newNode("gone", testutil.NotReady, testutil.WithProviderID("aws:///eu-west-1a/i-0123456789abcdef0")),
	)
	eventually(t, "the node of this region whose instance does not exist is deleted", func() error {
		if _, ok := getNode(t, client, "gone"); ok {
			return fmt.Errorf("still there")
		}
		return nil
	})
	time.Sleep(time.Second) // five more lifecycle sweeps.
	if _, ok := getNode(t, client, "us-east"); !ok {
		t.Fatal("the node of region us-east-1 was deleted by the eu-west-1 backend")
	}
}

// TestServiceControllerSubnetTaggedKeepsNLB runs the upstream service
// controller: after someone tags another subnet for load balancers in a
// zone the NLB is in, the next node change (an UpdateLoadBalancer) registers
// the new node on the same NLB: same ARN, same DNS name in the Service's
// status, no second CreateLoadBalancer and no DeleteLoadBalancer.
func TestServiceControllerSubnetTaggedKeepsNLB(t *testing.T) {
	e := newEnv(t)
	e.freshSubnets()
	client := testutil.NewClientset()
	ctx := context.Background()
	runServiceController(t, e.cloud, client)
	if _, err := client.CoreV1().Services("default").Create(ctx, newService("web"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var before awsfake.LoadBalancerView
	eventually(t, "Service gets the NLB's DNS name", func() error {
		s, err := client.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil || len(s.Status.LoadBalancer.Ingress) == 0 {
			return fmt.Errorf("no ingress yet (%w)", err)
		}
		lbs := e.fake.LoadBalancers()
		if len(lbs) != 1 || s.Status.LoadBalancer.Ingress[0].Hostname != lbs[0].DNSName {
			return fmt.Errorf("ingress %v, load balancers %+v", s.Status.LoadBalancer.Ingress, lbs)
		}
		before = lbs[0]
		return nil
	})
	e.fake.AddSubnet(awsfake.Subnet{ID: "subnet-0c", VPCID: testVPC, Zone: testRegion + "a", CIDR: "10.0.2.0/24",
		Tags: map[string]string{tagRoleELB: "1", tagClusterPrefix + testCluster: "shared"}})
	createNodes(t, client, e.awsNodes(1, 1)...)
	eventually(t, "the new node is a target", func() error {
		for _, tg := range e.fake.TargetGroups() {
			if len(tg.Targets) == 1 {
				return nil
			}
		}
		return fmt.Errorf("target groups %+v", e.fake.TargetGroups())
	})
	lbs := e.fake.LoadBalancers()
	if len(lbs) != 1 || lbs[0].ARN != before.ARN || lbs[0].DNSName != before.DNSName {
		t.Fatalf("load balancers %+v, want the same %s (%s)", lbs, before.ARN, before.DNSName)
	}
	if c, d := e.fake.Calls("CreateLoadBalancer"), e.fake.Calls("DeleteLoadBalancer"); c != 1 || d != 0 {
		t.Errorf("CreateLoadBalancer %d, DeleteLoadBalancer %d calls; want 1 and 0", c, d)
	}
	s, err := client.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
	if err != nil || len(s.Status.LoadBalancer.Ingress) != 1 || s.Status.LoadBalancer.Ingress[0].Hostname != before.DNSName {
		t.Errorf("status %+v (%v), want %s", s.Status.LoadBalancer, err, before.DNSName)
	}
}

// TestCreateRouteOtherRegionNode: a route to a node of another region is
// refused (NodeOutsideRegion) before any change to this region's EC2.
func TestCreateRouteOtherRegionNode(t *testing.T) {
	e := newEnv(t, func(s *Settings) { s.Routes = &RoutesSettings{RouteTableID: "rtb-0c1"} })
	e.fake.AddRouteTable(awsfake.RouteTable{ID: "rtb-0c1", VPCID: testVPC})
	client := testutil.NewClientset(newNode("us-east", testutil.WithProviderID("aws:///us-east-1a/i-0123456789abcdef0")))
	factory := informers.NewSharedInformerFactory(client, 0)
	e.cloud.SetInformers(factory)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); factory.Shutdown() })
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	routes, _ := e.cloud.Routes()
	err := routes.CreateRoute(ctx, testCluster, "", &cloudprovider.Route{TargetNode: "us-east", DestinationCIDR: "10.244.9.0/24"})
	if ue, ok := backends.AsUserError(err); !ok || ue.Reason != reasonOutsideRegion {
		t.Errorf("CreateRoute = %v, want a %s user error", err, reasonOutsideRegion)
	}
	e.assertNoMutation(t, "CreateRoute to another region's node")
}

// handingCloud is the backend as the upstream service controller sees it,
// recording how many nodes its last successful UpdateLoadBalancer was
// handed: the test knows when a node sync has run with a node, not only
// that one was queued.
type handingCloud struct {
	*Cloud
	handed atomic.Int32
}

func (c *handingCloud) LoadBalancer() (cloudprovider.LoadBalancer, bool) {
	lb, ok := c.Cloud.LoadBalancer()
	return handingLB{lb, &c.handed}, ok
}

type handingLB struct {
	cloudprovider.LoadBalancer
	handed *atomic.Int32
}

func (l handingLB) UpdateLoadBalancer(ctx context.Context, cluster string, svc *corev1.Service, nodes []*corev1.Node) error {
	err := l.LoadBalancer.UpdateLoadBalancer(ctx, cluster, svc, nodes)
	if err == nil {
		l.handed.Store(int32(len(nodes)))
	}
	return err
}

// TestServiceControllerJoiningNode is TestJoiningNodeKeepsInstanceTargets
// driven by the upstream service controller (`--controllers=*,service`):
// its node sync hands a node to UpdateLoadBalancer as soon as it is
// created, before the node controller has set its providerID, and again
// once the providerID is set (a providerID change is a node-set change to
// it). The NLB keeps its instance target group throughout: no target group
// created or deleted, no listener moved; the instance becomes a target of
// the same group once the node is initialised.
func TestServiceControllerJoiningNode(t *testing.T) {
	e := newEnv(t)
	cloud := &handingCloud{Cloud: e.cloud}
	client := testutil.NewClientset()
	ctx := context.Background()
	testutil.StartServiceController(t, cloud, client, testCluster, 2)
	if _, err := client.CoreV1().Services("default").Create(ctx, newService("web"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the NLB is created", func() error {
		if n := len(e.fake.LoadBalancers()); n != 1 {
			return fmt.Errorf("%d load balancers", n)
		}
		return nil
	})
	createNodes(t, client, e.awsNodes(1, 2)...)
	instanceTargets := func(want int) func() error {
		return func() error {
			if tgs := e.fake.TargetGroups(); len(tgs) != 1 || tgs[0].TargetType != targetInstance || len(tgs[0].Targets) != want {
				return fmt.Errorf("target groups %+v, want one of %d instance targets", tgs, want)
			}
			return nil
		}
	}
	eventually(t, "the two instances are targets", instanceTargets(2))
	arn := e.fake.TargetGroups()[0].ARN
	calls := map[string]int{}
	for _, op := range []string{"CreateTargetGroup", "DeleteTargetGroup", "ModifyListener"} {
		calls[op] = e.fake.Calls(op)
	}

	joining := e.awsNodes(3, 1)[0]
	pid := joining.Spec.ProviderID
	joining.Spec.ProviderID = ""
	createNodes(t, client, joining)
	eventually(t, "the node sync hands the joining node to the NLB", func() error {
		if n := cloud.handed.Load(); n != 3 {
			return fmt.Errorf("last update handed %d nodes", n)
		}
		return nil
	})
	if err := instanceTargets(2)(); err != nil || e.fake.TargetGroups()[0].ARN != arn {
		t.Errorf("with the joining node handed: %v (want the target group %s kept)", err, arn)
	}

	joining.Spec.ProviderID = pid
	if _, err := client.CoreV1().Nodes().Update(ctx, joining, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the initialised node's instance is a target", instanceTargets(3))
	if got := e.fake.TargetGroups()[0].ARN; got != arn {
		t.Errorf("target group %s after the node joined, want %s kept", got, arn)
	}
	for op, before := range calls {
		if n := e.fake.Calls(op) - before; n != 0 {
			t.Errorf("%s called %d times while a node joined, want 0", op, n)
		}
	}
}
