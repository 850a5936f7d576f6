package aws

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/multicloud-ccm/multicloud-ccm/internal/awsfake"
	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends/aws/awsid"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/cloudapi"
)

// TestParseProviderIDUserError checks that parseProviderID answers as
// awsid.ParseProviderID (whose tests and fuzz target are there) and makes
// its errors user errors with reason InvalidProviderID, and that
// providerID writes awsid.ProviderID's form.
func TestParseProviderIDUserError(t *testing.T) {
	for _, in := range []string{"aws:///eu-west-1a/i-0123456789abcdef0", "aws:///i-01234567", "aws:///eu-west-1a/vol-01234567", "gce:///p/z/i-01234567", "AWS:///eu-west-1a/i-01234567", ""} {
		t.Run(in, func(t *testing.T) {
			got, err := parseProviderID(in)
			want, wantErr := awsid.ParseProviderID(in)
			if got != want || (err == nil) != (wantErr == nil) {
				t.Fatalf("parseProviderID(%q) = %q, %v; awsid.ParseProviderID gives %q, %v", in, got, err, want, wantErr)
			}
			if err == nil {
				return
			}
			if err.Error() != "spec.providerID: "+wantErr.Error() {
				t.Errorf("parseProviderID(%q) error %q, want spec.providerID: %v", in, err, wantErr)
			}
			if ue, ok := backends.AsUserError(err); !ok || ue.Reason != "InvalidProviderID" {
				t.Errorf("parseProviderID(%q) error %v is not a user error with reason InvalidProviderID", in, err)
			}
		})
	}
	if got := providerID("eu-west-1a", "i-01234567"); got != "aws:///eu-west-1a/i-01234567" {
		t.Errorf("providerID = %q", got)
	}
}

func TestInstanceLookups(t *testing.T) {
	e := newEnv(t)
	in := e.addInstance(1, func(i *awsfake.Instance) {
		i.PrivateIPs = append(i.PrivateIPs, "10.0.11.99")
		i.PublicIP, i.PublicDNSName = "54.1.2.3", "ec2-54-1-2-3.eu-west-1.compute.amazonaws.com"
	})
	e.addInstance(2, func(i *awsfake.Instance) { i.State = "stopped" })
	e.addInstance(3, func(i *awsfake.Instance) { i.State = "terminated" })
	e.addInstance(4, func(i *awsfake.Instance) { i.VPCID = "vpc-0ther" })
	e.addInstance(5, func(i *awsfake.Instance) { i.State = "stopping" })
	e.addInstance(6, func(i *awsfake.Instance) { i.State = "shutting-down" })
	want := "aws:///eu-west-1b/" + in.ID
	inst, _ := e.cloud.InstancesV2()
	ctx := context.Background()

	for _, tc := range []struct {
		name                 string
		node                 *corev1.Node
		exists, shutdown     bool
		providerID, errorMsg string
	}{
		{name: "providerID as written upstream", node: newNode("n", testutil.WithProviderID(want)), exists: true, providerID: want},
		{name: "providerID without zone", node: newNode("n", testutil.WithProviderID("aws:////"+in.ID)), exists: true, providerID: want},
		{name: "node named after the instance", node: newNode(in.ID), exists: true, providerID: want},
		{name: "node named by private DNS", node: newNode(in.PrivateDNSName), exists: true, providerID: want},
		{name: "node found by secondary IP", node: newNode("vm-1", testutil.WithInternalIP("10.0.11.99")), exists: true, providerID: want},
		{name: "stopped instance is shut down", node: newNode("n", testutil.WithProviderID("aws:///eu-west-1a/"+instanceID(2))), exists: true, shutdown: true, providerID: "aws:///eu-west-1a/" + instanceID(2)},
		{name: "stopping instance is shut down", node: newNode("n", testutil.WithProviderID("aws:///eu-west-1b/"+instanceID(5))), exists: true, shutdown: true, providerID: "aws:///eu-west-1b/" + instanceID(5)},
		{name: "shutting-down instance still exists", node: newNode("n", testutil.WithProviderID("aws:///eu-west-1a/"+instanceID(6))), exists: true, providerID: "aws:///eu-west-1a/" + instanceID(6)},
		{name: "terminated instance is gone", node: newNode("n", testutil.WithProviderID("aws:///eu-west-1b/"+instanceID(3))), errorMsg: "not found"},
		{name: "instance unknown to AWS is gone", node: newNode("n", testutil.WithProviderID("aws:///eu-west-1b/i-0000000000ff")), errorMsg: "not found"},
		{name: "instance in another VPC still exists", node: newNode("n", testutil.WithProviderID("aws:///eu-west-1a/"+instanceID(4))), exists: true, providerID: "aws:///eu-west-1a/" + instanceID(4)},
		{name: "node of another cloud is not ours", node: newNode("vsphere-1", testutil.WithInternalIP("192.168.1.5")), errorMsg: "not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			exists, err := inst.InstanceExists(ctx, tc.node)
			if err != nil || exists != tc.exists {
				t.Fatalf("InstanceExists = %v, %v; want %v", exists, err, tc.exists)
			}
			md, err := inst.InstanceMetadata(ctx, tc.node)
			if tc.errorMsg != "" {
				if !errors.Is(err, cloudprovider.InstanceNotFound) || md != nil {
					t.Fatalf("InstanceMetadata = %+v, %v; want InstanceNotFound", md, err)
				}
				return
			}
			if err != nil || md.ProviderID != tc.providerID {
				t.Fatalf("InstanceMetadata = %+v, %v; want providerID %s", md, err, tc.providerID)
			}
			shutdown, err := inst.InstanceShutdown(ctx, tc.node)
			if err != nil || shutdown != tc.shutdown {
				t.Errorf("InstanceShutdown = %v, %v; want %v", shutdown, err, tc.shutdown)
			}
		})
	}

	t.Run("metadata", func(t *testing.T) {
		md, err := inst.InstanceMetadata(ctx, newNode("n", testutil.WithProviderID(want)))
		if err != nil {
			t.Fatal(err)
		}
		if md.InstanceType != "m5.large" || md.Zone != "eu-west-1b" || md.Region != testRegion || md.AdditionalLabels[ZoneIDLabel] != "euw1-az2" {
			t.Errorf("metadata = %+v", md)
		}
		wantAddrs := []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: in.PrivateIPs[0]}, {Type: corev1.NodeInternalIP, Address: "10.0.11.99"},
			{Type: corev1.NodeExternalIP, Address: "54.1.2.3"}, {Type: corev1.NodeInternalDNS, Address: in.PrivateDNSName},
			{Type: corev1.NodeHostName, Address: in.PrivateDNSName}, {Type: corev1.NodeExternalDNS, Address: in.PublicDNSName}}
		if len(md.NodeAddresses) != len(wantAddrs) {
			t.Fatalf("addresses = %v, want %v", md.NodeAddresses, wantAddrs)
		}
		for i := range wantAddrs {
			if md.NodeAddresses[i] != wantAddrs[i] {
				t.Errorf("address %d = %v, want %v", i, md.NodeAddresses[i], wantAddrs[i])
			}
		}
	})
}

func TestInstanceSafety(t *testing.T) {
	ctx := context.Background()
	t.Run("an outage is an error, never gone", func(t *testing.T) {
		e := newEnv(t)
		e.addInstance(1)
		inst, _ := e.cloud.InstancesV2()
		e.fake.SetOutage(true)
		exists, err := inst.InstanceExists(ctx, newNode("n", testutil.WithProviderID("aws:///eu-west-1b/"+instanceID(1))))
		if err == nil || exists {
			t.Fatalf("InstanceExists during outage = %v, %v; want an error", exists, err)
		}
		md, err := inst.InstanceMetadata(ctx, newNode("n", testutil.WithProviderID("aws:///eu-west-1b/"+instanceID(1))))
		if err == nil || md != nil || errors.Is(err, cloudprovider.InstanceNotFound) {
			t.Fatalf("InstanceMetadata during outage = %+v, %v", md, err)
		}
	})
	t.Run("a new node whose instance AWS does not show yet is an error", func(t *testing.T) {
		e := newEnv(t)
		inst, _ := e.cloud.InstancesV2()
		exists, err := inst.InstanceExists(ctx, newNode("n", createdNow, testutil.WithProviderID("aws:///eu-west-1b/"+instanceID(7))))
		if err == nil || exists {
			t.Fatalf("InstanceExists = %v, %v; want an error", exists, err)
		}
	})
	t.Run("a malformed providerID is an error", func(t *testing.T) {
		e := newEnv(t)
		inst, _ := e.cloud.InstancesV2()
		if exists, err := inst.InstanceExists(ctx, newNode("n", testutil.WithProviderID("aws:///eu-west-1b/vol-1"))); err == nil || exists {
			t.Fatalf("InstanceExists = %v, %v; want an error", exists, err)
		}
	})
	t.Run("a throttling storm is ridden out", func(t *testing.T) {
		e := newEnv(t)
		e.addInstance(1)
		inst, _ := e.cloud.InstancesV2()
		e.fake.Throttle(4)
		exists, err := inst.InstanceExists(ctx, newNode("n", testutil.WithProviderID("aws:///eu-west-1b/"+instanceID(1))))
		if err != nil || !exists {
			t.Fatalf("InstanceExists = %v, %v", exists, err)
		}
		if n, a := e.fake.Calls("DescribeInstances"), e.fake.Attempts("DescribeInstances"); n != 1 || a != 5 {
			t.Errorf("DescribeInstances calls = %d, attempts = %d; want one call of 5 attempts (4 throttled)", n, a)
		}
	})
}

// TestInstanceSweepIsBatched: a sweep costs one DescribeInstances per
// 1,000 of the cluster's nodes, however many other instances the VPC holds
// and whether or not a node is in another (peered) VPC: from the first
// sweep with the Node lister, from the second without it (the first asks
// for each instance once).
func TestInstanceSweepIsBatched(t *testing.T) {
	const nodes, others = 2500, 3000
	for _, lister := range []bool{true, false} {
		t.Run(fmt.Sprintf("lister=%v", lister), func(t *testing.T) {
			e := newEnv(t, noBudget)
			var ns []*corev1.Node
			for i := range nodes + others {
				in := e.addInstance(i, func(in *awsfake.Instance) {
					if i%10 == 0 {
						in.VPCID = "vpc-0peered"
					}
				})
				if i < nodes {
					ns = append(ns, newNode(fmt.Sprint("n", i), testutil.WithProviderID(providerID(in.Zone, in.ID))))
				}
			}
			if lister {
				e.cloud.instances.setNodeLister(nodeLister(t, ns...))
			}
			sweep := func() int {
				e.cloud.instances.cache.expire()
				e.fake.ResetCalls()
				for _, n := range ns {
					if _, err := e.cloud.instances.InstanceMetadata(context.Background(), n); err != nil {
						t.Fatal(err)
					}
				}
				return e.fake.Calls("DescribeInstances")
			}
			first := sweep()
			if lister && first != 3 {
				t.Errorf("first sweep: DescribeInstances calls = %d for %d nodes, want 3", first, nodes)
			}
			if got := sweep(); got != 3 {
				t.Errorf("second sweep: DescribeInstances calls = %d for %d nodes, want 3", got, nodes)
			}
		})
	}
}

// TestGoneInstanceLeavesTheBatches: an instance AWS no longer knows fails
// a batch naming it; the batch is listed again by filter, the instance is
// positively gone, and the next listings leave it out.
func TestGoneInstanceLeavesTheBatches(t *testing.T) {
	e := newEnv(t)
	var ns []*corev1.Node
	for i := range 3 {
		in := e.addInstance(i)
		ns = append(ns, newNode(fmt.Sprint("n", i), testutil.WithProviderID(providerID(in.Zone, in.ID))))
	}
	e.cloud.instances.setNodeLister(nodeLister(t, ns...))
	e.fake.RemoveInstance(instanceID(1))
	ctx := context.Background()
	for round := range 2 {
		e.cloud.instances.cache.expire()
		e.fake.ResetCalls()
		for i, n := range ns {
			exists, err := e.cloud.instances.InstanceExists(ctx, n)
			if err != nil || exists != (i != 1) {
				t.Fatalf("round %d: InstanceExists(%s) = %v, %v; want %v", round, n.Name, exists, err, i != 1)
			}
		}
		// Round 0: the batch (refused), the filter, the gone one directly.
		// Round 1: the batch without it, the gone one directly.
		if got, want := e.fake.Calls("DescribeInstances"), []int{3, 2}[round]; got != want {
			t.Errorf("round %d: DescribeInstances calls = %d, want %d", round, got, want)
		}
	}
}

// TestMalformedInstanceLeavesTheBatches: a batch AWS refuses for an ID it
// calls malformed is listed again by filter, the other instances found.
func TestMalformedInstanceLeavesTheBatches(t *testing.T) {
	e := newEnv(t)
	var ns []*corev1.Node
	for i := range 3 {
		in := e.addInstance(i)
		ns = append(ns, newNode(fmt.Sprint("n", i), testutil.WithProviderID(providerID(in.Zone, in.ID))))
	}
	e.cloud.instances.setNodeLister(nodeLister(t, ns...))
	e.fake.FailNext("DescribeInstances", "InvalidInstanceID.Malformed")
	for _, n := range ns {
		if exists, err := e.cloud.instances.InstanceExists(context.Background(), n); err != nil || !exists {
			t.Fatalf("InstanceExists(%s) = %v, %v; want true", n.Name, exists, err)
		}
	}
	if got := e.fake.Calls("DescribeInstances"); got != 2 {
		t.Errorf("DescribeInstances calls = %d, want 2 (the refused batch, the filter)", got)
	}
}

// nodeLister lists the nodes.
func nodeLister(t testing.TB, nodes ...*corev1.Node) corelisters.NodeLister {
	t.Helper()
	idx := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{})
	for _, n := range nodes {
		if err := idx.Add(n); err != nil {
			t.Fatal(err)
		}
	}
	return corelisters.NewNodeLister(idx)
}

func TestZoneInRegion(t *testing.T) {
	for _, tc := range []struct {
		zone, region string
		want         bool
	}{
		{"eu-west-1a", "eu-west-1", true},
		{"us-west-2-lax-1a", "us-west-2", true},
		{"us-east-1-wl1-bos-wlz-1", "us-east-1", true},
		{"us-east-1a", "eu-west-1", false},
		{"eu-west-1", "eu-west-1", false},
		{"eu-west-10a", "eu-west-1", false},
		{"eu-west-1ab", "eu-west-1", false},
		{"eu-west-1-", "eu-west-1", false},
		{"x", "eu-west-1", false},
	} {
		if got := zoneInRegion(tc.zone, tc.region); got != tc.want {
			t.Errorf("zoneInRegion(%q, %q) = %v, want %v", tc.zone, tc.region, got, tc.want)
		}
	}
}

// TestForeignRegionIsNotOurs: a providerID naming a zone of another region
// (or, without a zone, a node labelled with another region or zone) is not
// this backend's node: every question about it is an error with reason
// NodeOutsideRegion, never "gone", whether or not an instance with that ID
// exists here (EC2 instance IDs are unique per region only).
func TestForeignRegionIsNotOurs(t *testing.T) {
	e := newEnv(t)
	here := e.addInstance(1)
	inst, _ := e.cloud.InstancesV2()
	ctx := context.Background()
	for _, node := range []*corev1.Node{
		newNode("n", testutil.WithProviderID("aws:///us-east-1a/i-0123456789abcdef0")),
		newNode("n", testutil.WithProviderID("aws://us-east-1b/i-0123456789abcdef0")),
		newNode("n", testutil.WithProviderID("aws://us-east-1/i-0123456789abcdef0")),
		newNode("n", testutil.WithProviderID("aws:///us-west-2-lax-1a/i-0123456789abcdef0")),
		newNode("n", testutil.WithProviderID("aws:///us-east-1a/"+here.ID)),
		newNode("n", testutil.WithProviderID("aws:///i-0123456789abcdef0"), testutil.WithLabel(corev1.LabelTopologyRegion, "us-east-1")),
		newNode("n", testutil.WithProviderID("aws:////i-0123456789abcdef0"), testutil.WithLabel(corev1.LabelTopologyZone, "us-east-1c")),
	} {
		t.Run(node.Spec.ProviderID+" "+fmt.Sprint(node.Labels), func(t *testing.T) {
			exists, err := inst.InstanceExists(ctx, node)
			if ue, ok := backends.AsUserError(err); !ok || ue.Reason != reasonOutsideRegion || exists {
				t.Errorf("InstanceExists = %v, %v; want a %s error", exists, err, reasonOutsideRegion)
			}
			if off, err := inst.InstanceShutdown(ctx, node); err == nil || off {
				t.Errorf("InstanceShutdown = %v, %v; want an error", off, err)
			}
			if md, err := inst.InstanceMetadata(ctx, node); err == nil || md != nil || errors.Is(err, cloudprovider.InstanceNotFound) {
				t.Errorf("InstanceMetadata = %+v, %v; want an error other than InstanceNotFound", md, err)
			}
		})
	}
	t.Run("a providerID naming this region, not a zone, is looked up", func(t *testing.T) {
		// aws://<region>/<id>: the upstream provider ignores the first
		// token; it names no zone, and the region is this one.
		node := newNode("n", testutil.WithProviderID("aws://"+testRegion+"/"+here.ID))
		if exists, err := inst.InstanceExists(ctx, node); err != nil || !exists {
			t.Errorf("InstanceExists = %v, %v; want true", exists, err)
		}
	})
	t.Run("a zone-less providerID with this region's labels is looked up", func(t *testing.T) {
		node := newNode("n", testutil.WithProviderID("aws:///i-0123456789abcdef0"), testutil.WithLabel(corev1.LabelTopologyRegion, testRegion), testutil.WithLabel(corev1.LabelTopologyZone, "eu-west-1a"))
		if exists, err := inst.InstanceExists(ctx, node); err != nil || exists {
			t.Errorf("InstanceExists = %v, %v; want false (AWS says the instance does not exist)", exists, err)
		}
	})
}

// TestWeakMatchIsNotClaimed: a node without a providerID whose address is
// one of an instance's but whose name is another EC2 name (another
// region's instance, say) is not claimed; one whose name is not an EC2 name
// still is, by address.
func TestWeakMatchIsNotClaimed(t *testing.T) {
	e := newEnv(t)
	in := e.addInstance(1)
	inst, _ := e.cloud.InstancesV2()
	ctx := context.Background()
	ip := in.PrivateIPs[0]
	for _, tc := range []struct {
		node *corev1.Node
		want bool
	}{
		{newNode("ip-10-0-11-11.us-east-1.compute.internal", testutil.WithInternalIP(ip)), false},
		{newNode("worker-1", testutil.WithAddress(corev1.NodeHostName, "ip-10-0-11-11.ec2.internal"), testutil.WithInternalIP(ip)), false},
		{newNode("i-0123456789abcdef0", testutil.WithInternalIP(ip)), false},
		{newNode("worker-1", testutil.WithAddress(corev1.NodeHostName, "worker-1"), testutil.WithInternalIP(ip)), true},
		{newNode("worker-1.example.com", testutil.WithInternalIP(ip)), true},
	} {
		t.Run(tc.node.Name, func(t *testing.T) {
			exists, err := inst.InstanceExists(ctx, tc.node)
			if err != nil || exists != tc.want {
				t.Errorf("InstanceExists = %v, %v; want %v", exists, err, tc.want)
			}
		})
	}
}

// TestShutdownIsFresh: a stopped answer is confirmed with AWS, so an
// instance started again is not called shut down from a listing taken while
// it was stopped.
func TestShutdownIsFresh(t *testing.T) {
	e := newEnv(t)
	in := e.addInstance(1, func(i *awsfake.Instance) { i.State = "stopped" })
	inst, _ := e.cloud.InstancesV2()
	ctx := context.Background()
	node := newNode("n", testutil.WithProviderID(providerID(in.Zone, in.ID)))
	if off, err := inst.InstanceShutdown(ctx, node); err != nil || !off {
		t.Fatalf("InstanceShutdown of a stopped instance = %v, %v", off, err)
	}
	e.fake.SetInstanceState(in.ID, "running")
	if off, err := inst.InstanceShutdown(ctx, node); err != nil || off {
		t.Fatalf("InstanceShutdown right after the instance started = %v, %v; want false", off, err)
	}
}

// TestListingFailureBacksOff: while EC2 is down, lookups within the
// failure backoff get the failed listing's error instead of each listing
// again; after it, the next lookup lists.
func TestListingFailureBacksOff(t *testing.T) {
	e := newEnv(t)
	e.addInstance(1)
	inst, _ := e.cloud.InstancesV2()
	ctx := context.Background()
	node := newNode("n", testutil.WithProviderID("aws:///eu-west-1b/"+instanceID(1)))
	e.fake.SetOutage(true)
	if _, err := inst.InstanceMetadata(ctx, node); err == nil {
		t.Fatal("InstanceMetadata succeeded while EC2 is down")
	}
	first := e.fake.Calls("DescribeInstances")
	for range 5 {
		if _, err := inst.InstanceMetadata(ctx, node); err == nil {
			t.Fatal("InstanceMetadata succeeded while EC2 is down")
		}
	}
	if n := e.fake.Calls("DescribeInstances"); n != first {
		t.Errorf("DescribeInstances calls = %d after five more lookups within the backoff, want %d", n, first)
	}
	e.fake.SetOutage(false)
	e.cloud.instances.cache.forgetFailure() // rather than wait out the backoff
	if _, err := inst.InstanceMetadata(ctx, node); err != nil {
		t.Fatalf("InstanceMetadata after the outage: %v", err)
	}
}

// TestCallerDeadlineIsNotAnOutage is issue 42's defect 2: a direct lookup
// ended by its caller's own deadline (here the EC2 budget refusing a wait
// that would pass it) is not remembered as "EC2 is down": the next
// lookup, from a caller with time to wait, asks AWS and finds the
// instance. Before, the failure backoff handed it the first caller's
// deadline error for 5 s.
func TestCallerDeadlineIsNotAnOutage(t *testing.T) {
	e := newEnv(t, func(s *Settings) {
		s.RateLimits = map[string]cloudapi.RateLimit{cloudapi.APIEC2: {QPS: 2, Bucket: 1}}
	})
	in := e.addInstance(1)
	inst, _ := e.cloud.InstancesV2()
	// One lookup spends the bucket's one token: the next comes in 500 ms.
	if _, err := inst.InstanceMetadata(context.Background(), newNode("ip-10-9-9-9.eu-west-1.compute.internal")); !errors.Is(err, cloudprovider.InstanceNotFound) {
		t.Fatalf("InstanceMetadata of a node no instance matches = %v, want InstanceNotFound", err)
	}
	node := newNode(in.PrivateDNSName)
	short, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := inst.InstanceMetadata(short, node); err == nil {
		t.Fatal("InstanceMetadata with a deadline before the next token succeeded")
	} else if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("InstanceMetadata with a deadline before the next token = %v, want it to be the caller's deadline (context.DeadlineExceeded)", err)
	}
	md, err := inst.InstanceMetadata(context.Background(), node)
	if err != nil || md == nil || md.ProviderID != providerID(in.Zone, in.ID) {
		t.Fatalf("InstanceMetadata of another caller, with time to wait = %+v, %v; want the instance (not the first caller's deadline)", md, err)
	}
}
