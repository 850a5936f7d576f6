package upstreamaws

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"
	awsv1 "k8s.io/cloud-provider-aws/pkg/providers/v1"

	"github.com/multicloud-ccm/multicloud-ccm/internal/awsfake"
)

const (
	region    = "eu-west-1"
	clusterID = "upstream"
)

// upstreamCloud builds upstream's provider exactly as its cloud-controller-manager
// does (the registered "aws" factory reading a cloud-config), with every service
// endpoint overridden to url and the control plane declared outside AWS (VPC,
// subnet and cluster ID given), so that nothing asks the instance metadata service.
// global are more lines of its [Global] section.
func upstreamCloud(t testing.TB, url, vpc, subnet string, global ...string) *awsv1.Cloud {
	t.Helper()
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDUPSTREAM")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	cloud, err := cloudprovider.GetCloudProvider(awsv1.ProviderName, strings.NewReader(upstreamCloudConfig(url, vpc, subnet, global...)))
	if err != nil {
		t.Fatalf("upstream provider: %v", err)
	}
	return cloud.(*awsv1.Cloud)
}

// env is the fake seeded as a cluster upstream manages, served over HTTP.
type env struct {
	fake   *awsfake.Server
	seeded awsfake.Seeded
	cloud  *awsv1.Cloud
	url    string
}

func newEnv(t testing.TB, instances int) *env {
	t.Helper()
	fake := awsfake.New(region)
	seeded := fake.Seed(awsfake.SeedSpec{ClusterID: clusterID, Instances: instances, NodeSecurityGroup: true})
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	return &env{fake: fake, seeded: seeded, cloud: upstreamCloud(t, srv.URL, seeded.VPCID, seeded.PrivateSubnets[0]), url: srv.URL}
}

func node(in awsfake.Instance) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: in.PrivateDNSName},
		Spec: v1.NodeSpec{ProviderID: "aws:///" + in.Zone + "/" + in.ID}}
}

func (e *env) nodes() []*v1.Node {
	var out []*v1.Node
	for _, in := range e.seeded.Instances {
		out = append(out, node(in))
	}
	return out
}

// TestUpstreamNodeSweep: upstream's InstancesV2, as the node and
// node-lifecycle controllers call it, answers for every node from the fake.
func TestUpstreamNodeSweep(t *testing.T) {
	e := newEnv(t, 4)
	i, ok := e.cloud.InstancesV2()
	if !ok {
		t.Fatal("upstream has no InstancesV2")
	}
	ctx := context.Background()
	for _, n := range e.nodes() {
		exists, err := i.InstanceExists(ctx, n)
		if err != nil || !exists {
			t.Fatalf("InstanceExists(%s) = %v, %v; want true", n.Name, exists, err)
		}
		down, err := i.InstanceShutdown(ctx, n)
		if err != nil || down {
			t.Fatalf("InstanceShutdown(%s) = %v, %v; want false", n.Name, down, err)
		}
		md, err := i.InstanceMetadata(ctx, n)
		if err != nil {
			t.Fatalf("InstanceMetadata(%s): %v", n.Name, err)
		}
		in := instanceOf(e.seeded, n)
		if md.ProviderID != n.Spec.ProviderID || md.InstanceType != in.InstanceType || md.Zone != in.Zone || md.Region != region {
			t.Errorf("InstanceMetadata(%s) = %+v; want %s %s in %s", n.Name, md, n.Spec.ProviderID, in.InstanceType, in.Zone)
		}
		if !hasAddress(md.NodeAddresses, v1.NodeInternalIP, in.PrivateIPs[0]) || !hasAddress(md.NodeAddresses, v1.NodeInternalDNS, in.PrivateDNSName) {
			t.Errorf("InstanceMetadata(%s) addresses %v; want %s and %s", n.Name, md.NodeAddresses, in.PrivateIPs[0], in.PrivateDNSName)
		}
	}
	gone := e.seeded.Instances[0]
	e.fake.RemoveInstance(gone.ID)
	if exists, err := i.InstanceExists(ctx, node(gone)); err != nil || exists {
		t.Fatalf("InstanceExists(removed %s) = %v, %v; want false, nil", gone.ID, exists, err)
	}
	stopped := e.seeded.Instances[1]
	e.fake.SetInstanceState(stopped.ID, "stopped")
	if down, err := i.InstanceShutdown(ctx, node(stopped)); err != nil || !down {
		t.Fatalf("InstanceShutdown(stopped %s) = %v, %v; want true, nil", stopped.ID, down, err)
	}
}

func instanceOf(s awsfake.Seeded, n *v1.Node) awsfake.Instance {
	for _, in := range s.Instances {
		if strings.HasSuffix(n.Spec.ProviderID, "/"+in.ID) {
			return in
		}
	}
	return awsfake.Instance{}
}

func hasAddress(as []v1.NodeAddress, typ v1.NodeAddressType, addr string) bool {
	for _, a := range as {
		if a.Type == typ && a.Address == addr {
			return true
		}
	}
	return false
}

func nlbService(name string, ports ...int32) *v1.Service {
	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("0b6a5c2e-" + name + "-4d1e-9f00-00000000000" + fmt.Sprint(len(name)%10)),
		Annotations: map[string]string{"service.beta.kubernetes.io/aws-load-balancer-type": "nlb"}},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, SessionAffinity: v1.ServiceAffinityNone, ExternalTrafficPolicy: v1.ServiceExternalTrafficPolicyCluster}}
	for i, p := range ports {
		svc.Spec.Ports = append(svc.Spec.Ports, v1.ServicePort{Name: fmt.Sprint("p", i), Protocol: v1.ProtocolTCP, Port: p, NodePort: 30000 + p%1000})
	}
	return svc
}

// TestUpstreamNLBLifecycle: upstream creates an NLB for a Service, updates it
// when the Service gains a port and the nodes change, and deletes it with
// everything it made.
func TestUpstreamNLBLifecycle(t *testing.T) {
	e := newEnv(t, 3)
	lb, ok := e.cloud.LoadBalancer()
	if !ok {
		t.Fatal("upstream has no LoadBalancer")
	}
	ctx := context.Background()
	svc := nlbService("web", 80)
	status, err := lb.EnsureLoadBalancer(ctx, clusterID, svc, e.nodes())
	if err != nil {
		t.Fatalf("EnsureLoadBalancer: %v", err)
	}
	lbs := e.fake.LoadBalancers()
	if len(lbs) != 1 || len(status.Ingress) != 1 || status.Ingress[0].Hostname != lbs[0].DNSName {
		t.Fatalf("after create: status %+v, load balancers %+v; want one NLB whose DNS name is the status", status, lbs)
	}
	if got := lbs[0].Name; got != lb.GetLoadBalancerName(ctx, clusterID, svc) {
		t.Errorf("NLB name %s; want upstream's %s", got, lb.GetLoadBalancerName(ctx, clusterID, svc))
	}
	e.fake.ResetCalls()
	if _, err := lb.EnsureLoadBalancer(ctx, clusterID, svc, e.nodes()); err != nil {
		t.Fatalf("EnsureLoadBalancer again: %v", err)
	}
	if m := e.fake.MutatingCalls(); len(m) != 0 {
		t.Errorf("EnsureLoadBalancer with nothing changed made mutating calls %v", m)
	}

	svc.Spec.Ports = append(svc.Spec.Ports, v1.ServicePort{Name: "tls", Protocol: v1.ProtocolTCP, Port: 443, NodePort: 30443})
	if _, err := lb.EnsureLoadBalancer(ctx, clusterID, svc, e.nodes()); err != nil {
		t.Fatalf("EnsureLoadBalancer with a second port: %v", err)
	}
	if got := len(e.fake.TargetGroups()); got != 2 {
		t.Errorf("after adding a port: %d target groups; want 2", got)
	}
	fewer := e.nodes()[:2]
	if err := lb.UpdateLoadBalancer(ctx, clusterID, svc, fewer); err != nil {
		t.Fatalf("UpdateLoadBalancer: %v", err)
	}
	for _, tg := range e.fake.TargetGroups() {
		if len(tg.Targets) != 2 {
			t.Errorf("after UpdateLoadBalancer with 2 nodes: target group %s has targets %v", tg.Name, tg.Targets)
		}
	}
	if _, exists, err := lb.GetLoadBalancer(ctx, clusterID, svc); err != nil || !exists {
		t.Fatalf("GetLoadBalancer = %v, %v; want it to exist", exists, err)
	}
	if err := lb.EnsureLoadBalancerDeleted(ctx, clusterID, svc); err != nil {
		t.Fatalf("EnsureLoadBalancerDeleted: %v", err)
	}
	if lbs, tgs := e.fake.LoadBalancers(), e.fake.TargetGroups(); len(lbs) != 0 || len(tgs) != 0 {
		t.Errorf("after delete: load balancers %v, target groups %v; want none", lbs, tgs)
	}
}
