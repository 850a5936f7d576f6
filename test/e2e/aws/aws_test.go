package aws

import (
	"context"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/multicloud-ccm/multicloud-ccm/internal/awsfake"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/framework"
)

// zoneIDLabel is the label the aws backend adds with the zone's ID.
const zoneIDLabel = "topology.k8s.aws/zone-id"

// TestAWSNodeByPrivateDNSName: a node registered under its instance's
// private DNS name, without a providerID, is claimed by the aws backend and
// initialised with the upstream providerID form, its zone, zone ID,
// instance type and address.
func TestAWSNodeByPrivateDNSName(t *testing.T) {
	cp := env(t)
	ctx := ctxFor(t)
	in := seeded.Instances[1]
	if _, err := framework.CreateNode(ctx, cp.Client, framework.NewNode(in.PrivateDNSName)); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("aws:///%s/%s", in.Zone, in.ID)
	framework.Eventually(t, settle, "node initialised by the aws backend", framework.NodeMatches(cp.Client, in.PrivateDNSName, func(n *corev1.Node) (bool, string) {
		seen := fmt.Sprintf("providerID %q labels %v addresses %v taints %v", n.Spec.ProviderID, n.Labels, n.Status.Addresses, n.Spec.Taints)
		return n.Spec.ProviderID == want && !framework.HasTaint(n, framework.UninitializedTaint) &&
			n.Labels[corev1.LabelTopologyZone] == in.Zone && n.Labels[zoneIDLabel] == in.ZoneID &&
			n.Labels[corev1.LabelInstanceTypeStable] == in.InstanceType && n.Labels[string(annotation.NodeBackend)] == awsBackend &&
			hasAddress(n, corev1.NodeInternalIP, in.PrivateIPs[0]), seen
	}))
}

// TestVSphereOnAWS is the mission's headline case: the cluster's nodes are
// VMs of another cloud (the bare-metal backend's inventory, linked to the
// VPC) plus one EC2 instance; a Service annotated for the aws backend gets
// an NLB whose IP targets are exactly the nodes' addresses at the NodePort
// and whose DNS name is the Service's ingress; a new node becomes a target,
// and so does a node whose address arrives after it joined;
// switching the annotation to the bare-metal backend moves the load
// balancer and leaves nothing in AWS; deleting the Service leaves nothing.
func TestVSphereOnAWS(t *testing.T) {
	cp := env(t)
	ctx := ctxFor(t)
	ec2Node := seeded.Instances[0]
	createNode(ctx, t, "vm-1", "baremetal://vm-1", "192.168.10.11")
	createNode(ctx, t, "vm-2", "baremetal://vm-2", "192.168.10.12")
	createNode(ctx, t, ec2Node.PrivateDNSName, fmt.Sprintf("aws:///%s/%s", ec2Node.Zone, ec2Node.ID), ec2Node.PrivateIPs[0])
	for _, name := range []string{"vm-1", "vm-2", ec2Node.PrivateDNSName} {
		framework.Eventually(t, settle, name+" initialised", framework.NodeMatches(cp.Client, name, initialised))
	}

	svc := framework.NewLoadBalancerService(ns, "web", framework.WithAnnotation(string(annotation.LoadBalancerBackend), awsBackend))
	if _, err := framework.CreateService(ctx, cp.Client, svc); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, settle, "status carries the NLB's DNS name", framework.ServiceMatches(cp.Client, ns, "web", ingressIsNLBOf("default/web")))
	nodePort := serviceNodePort(ctx, t, cp, "web")
	framework.Eventually(t, settle, "IP targets are exactly the nodes' addresses", ipTargetsAreNodes(cp, "default/web", nodePort, "192.168.10.11", "192.168.10.12", ec2Node.PrivateIPs[0]))

	createNode(ctx, t, "vm-3", "baremetal://vm-3", "192.168.10.13")
	framework.Eventually(t, settle, "the new node is registered", ipTargetsAreNodes(cp, "default/web", nodePort, "192.168.10.13"))

	// A node whose addresses arrive after upstream synced the load balancer
	// with it: registered initialised, with its providerID and no
	// addresses, which the CCM's periodic status update then fills in.
	// Upstream's service controller does not re-sync on an address change;
	// the router does.
	late := framework.NewNode("vm-4", framework.WithProviderID("baremetal://vm-4"), framework.WithoutUninitializedTaint())
	if _, err := framework.CreateNode(ctx, cp.Client, late); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, settle, "vm-4's address filled in by the CCM", framework.NodeMatches(cp.Client, "vm-4", func(n *corev1.Node) (bool, string) {
		return hasAddress(n, corev1.NodeInternalIP, "192.168.10.14"), fmt.Sprintf("addresses %v", n.Status.Addresses)
	}))
	framework.Eventually(t, settle, "the node whose address arrived late is registered", ipTargetsAreNodes(cp, "default/web", nodePort, "192.168.10.14"))

	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, annotation.LoadBalancerBackend, metalBackend)
	if _, err := cp.Client.CoreV1().Services(ns).Patch(ctx, "web", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, settle, "moved to the bare-metal pool", framework.ServiceMatches(cp.Client, ns, "web", ingressInPool))
	framework.Eventually(t, settle, "nothing left in AWS after the move", nothingInAWS)

	if err := cp.Client.CoreV1().Services(ns).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, settle, "Service gone", framework.ServiceGone(cp.Client, ns, "web"))
	if err := nothingLeft(); err != nil {
		t.Error(err)
	}
	t.Logf("AWS calls: %v", fake.CallCounts())
}

// TestDeleteLeavesNothing: deleting a Service served by the aws backend
// removes its NLB, listeners, target groups and security group.
func TestDeleteLeavesNothing(t *testing.T) {
	cp := env(t)
	ctx := ctxFor(t)
	svc := framework.NewLoadBalancerService(ns, "gone", framework.WithAnnotation(string(annotation.LoadBalancerBackend), awsBackend),
		func(s *corev1.Service) {
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53})
			s.Spec.LoadBalancerSourceRanges = []string{"203.0.113.0/24"}
		})
	if _, err := framework.CreateService(ctx, cp.Client, svc); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, settle, "status carries the NLB's DNS name", framework.ServiceMatches(cp.Client, ns, "gone", ingressIsNLBOf("default/gone")))
	if lb := lbOf("default/gone"); lb == nil || len(lb.Listeners) != 2 {
		t.Fatalf("load balancer %+v, want two listeners", lb)
	}
	if err := cp.Client.CoreV1().Services(ns).Delete(ctx, "gone", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, settle, "Service gone", framework.ServiceGone(cp.Client, ns, "gone"))
	if err := nothingLeft(); err != nil {
		t.Error(err)
	}
}

func createNode(ctx context.Context, t *testing.T, name, providerID, ip string) {
	t.Helper()
	n := framework.NewNode(name, framework.WithProviderID(providerID),
		framework.WithAddresses(corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip}))
	if _, err := framework.CreateNode(ctx, suite.ControlPlane(t).Client, n); err != nil {
		t.Fatal(err)
	}
}

func initialised(n *corev1.Node) (bool, string) {
	return !framework.HasTaint(n, framework.UninitializedTaint), fmt.Sprintf("taints %v", n.Spec.Taints)
}

func hasAddress(n *corev1.Node, typ corev1.NodeAddressType, addr string) bool {
	for _, a := range n.Status.Addresses {
		if a.Type == typ && a.Address == addr {
			return true
		}
	}
	return false
}

func serviceNodePort(ctx context.Context, t *testing.T, cp *framework.ControlPlane, name string) int32 {
	t.Helper()
	s, err := cp.Client.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s.Spec.Ports[0].NodePort
}

// lbOf returns the fake's load balancer tagged for the Service, or nil.
func lbOf(service string) *awsfake.LoadBalancerView {
	for _, lb := range fake.LoadBalancers() {
		if lb.Tags["kubernetes.io/service-name"] == service && lb.Tags["kubernetes.io/cluster/"+clusterID] == "owned" {
			return &lb
		}
	}
	return nil
}

// ingressIsNLBOf holds once the Service's only ingress is the hostname of
// the one active NLB tagged for it.
func ingressIsNLBOf(service string) framework.ServiceCondition {
	return func(s *corev1.Service) (bool, string) {
		lb := lbOf(service)
		seen := fmt.Sprintf("ingress %v, load balancer %+v", s.Status.LoadBalancer.Ingress, lb)
		ing := s.Status.LoadBalancer.Ingress
		return lb != nil && lb.State == "active" && len(ing) == 1 && ing[0].Hostname == lb.DNSName && ing[0].IP == "", seen
	}
}

// ipTargetsAreNodes holds once the Service's IP targets are exactly the
// first InternalIP of every Node in the cluster (other tests' nodes too:
// the service controller hands every node to the load balancer), at
// nodePort, and include the addresses in mustHave.
func ipTargetsAreNodes(cp *framework.ControlPlane, service string, nodePort int32, mustHave ...string) framework.Condition {
	return func(ctx context.Context) (bool, string, error) {
		nodes, err := cp.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		var want []string
		ips := map[string]bool{}
		for _, n := range nodes.Items {
			for _, a := range n.Status.Addresses {
				if a.Type == corev1.NodeInternalIP {
					ips[a.Address] = true
					target := fmt.Sprintf("%s:%d", a.Address, nodePort)
					if !strings.HasPrefix(a.Address, "10.0.") {
						target += "@all" // outside the VPC: AWS requires zone "all".
					}
					want = append(want, target)
					break
				}
			}
		}
		for _, ip := range mustHave {
			if !ips[ip] {
				return false, fmt.Sprintf("node with %s not listed yet", ip), nil
			}
		}
		sort.Strings(want)
		return ipTargets(service, strings.Join(want, ","))(ctx)
	}
}

// ipTargets holds once the Service's NLB has one listener, forwarding to
// one IP target group whose targets are want ("ip:port[@all]", sorted,
// comma-separated).
func ipTargets(service, want string) framework.Condition {
	return func(context.Context) (bool, string, error) {
		lb := lbOf(service)
		tgs := targetGroupsOf(service)
		seen := fmt.Sprintf("load balancer %+v, target groups %+v", lb, tgs)
		if lb == nil || len(lb.Listeners) != 1 || len(tgs) != 1 || !strings.HasSuffix(lb.Listeners[0], "->"+tgs[0].Name) {
			return false, seen, nil
		}
		return tgs[0].TargetType == "ip" && strings.Join(tgs[0].Targets, ",") == want, "want " + want + "; " + seen, nil
	}
}

func ingressInPool(s *corev1.Service) (bool, string) {
	pool := netip.MustParsePrefix(metalPool)
	ips := framework.IngressIPs(s)
	seen := fmt.Sprintf("ingress %v", s.Status.LoadBalancer.Ingress)
	if len(ips) != 1 || len(s.Status.LoadBalancer.Ingress) != 1 {
		return false, seen
	}
	ip, err := netip.ParseAddr(ips[0])
	return err == nil && pool.Contains(ip), seen
}

func nothingInAWS(context.Context) (bool, string, error) {
	err := nothingLeft()
	if err != nil {
		return false, err.Error(), nil
	}
	return true, "", nil
}

// nothingLeft checks that no load balancer, target group, listener or
// security group is left in the fake.
func nothingLeft() error {
	if n := fake.ResourceCount(); n != 0 {
		return fmt.Errorf("%d AWS resources left: load balancers %+v, target groups %+v", n, fake.LoadBalancers(), fake.TargetGroups())
	}
	return nil
}

// TestOtherRegionNodeStays: a NotReady node whose providerID names a zone
// of another region (us-east-1a, while the aws backend serves eu-west-1) is
// not the backend's node. The CCM's node-lifecycle controller, asking every
// second, does not delete it, and the Node gets a Warning event
// NodeOutsideRegion saying why. (A Node is less than 2 minutes old here, so
// even a backend without the region rule would not delete it yet: the
// event is what tells the two apart. The deletion itself is proven on old
// Nodes by pkg/backends/aws TestForeignRegionNodeIsNeverDeleted.)
func TestOtherRegionNodeStays(t *testing.T) {
	cp := env(t)
	ctx := ctxFor(t)
	const name = "us-east-node"
	n := framework.NewNode(name, framework.WithProviderID("aws:///us-east-1a/i-0123456789abcdef0"),
		framework.WithoutUninitializedTaint(), framework.WithReady(corev1.ConditionFalse))
	if _, err := framework.CreateNode(ctx, cp.Client, n); err != nil {
		t.Fatal(err)
	}
	framework.Consistently(t, 10*time.Second, "the node of another region stays", framework.NodeMatches(cp.Client, name, func(*corev1.Node) (bool, string) {
		return true, ""
	}))
	framework.Eventually(t, settle, "Warning event NodeOutsideRegion on the node",
		framework.EventSeen(cp.Client, "Node", "", name, corev1.EventTypeWarning, "NodeOutsideRegion"))
	if err := cp.Client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}
