package aws

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"weak"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/multicloud-ccm/multicloud-ccm/internal/awsfake"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// review66bUpstreamNLB is upstreamNLB with the upstream target group's name
// given, so that one test can hold several Services' upstream NLBs.
func review66bUpstreamNLB(t *testing.T, e *env, svc *corev1.Service, tgName string, targets ...string) string {
	t.Helper()
	ctx := context.Background()
	tags := []elbtypes.Tag{{Key: awssdk.String(tagService), Value: awssdk.String(svc.Namespace + "/" + svc.Name)},
		{Key: awssdk.String(tagClusterPrefix + testCluster), Value: awssdk.String("owned")}}
	lb, err := e.cloud.lb.elb.CreateLoadBalancer(ctx, &elbv2.CreateLoadBalancerInput{Name: awssdk.String(cloudprovider.DefaultLoadBalancerName(svc)),
		Type: elbtypes.LoadBalancerTypeEnumNetwork, Subnets: []string{"subnet-0a", "subnet-0b"}, Tags: tags})
	if err != nil {
		t.Fatal(err)
	}
	tg, err := e.cloud.lb.elb.CreateTargetGroup(ctx, &elbv2.CreateTargetGroupInput{Name: awssdk.String(tgName), Protocol: elbtypes.ProtocolEnumTcp,
		Port: awssdk.Int32(30080), VpcId: awssdk.String(testVPC), TargetType: elbtypes.TargetTypeEnumInstance, HealthCheckProtocol: elbtypes.ProtocolEnumTcp,
		HealthCheckPort: awssdk.String("traffic-port"), HealthCheckIntervalSeconds: awssdk.Int32(30), HealthyThresholdCount: awssdk.Int32(3), UnhealthyThresholdCount: awssdk.Int32(3), Tags: tags})
	if err != nil {
		t.Fatal(err)
	}
	var ts []elbtypes.TargetDescription
	for _, id := range targets {
		ts = append(ts, elbtypes.TargetDescription{Id: awssdk.String(id), Port: awssdk.Int32(30080)})
	}
	if _, err := e.cloud.lb.elb.RegisterTargets(ctx, &elbv2.RegisterTargetsInput{TargetGroupArn: tg.TargetGroups[0].TargetGroupArn, Targets: ts}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.cloud.lb.elb.CreateListener(ctx, &elbv2.CreateListenerInput{LoadBalancerArn: lb.LoadBalancers[0].LoadBalancerArn, Port: awssdk.Int32(80), Protocol: elbtypes.ProtocolEnumTcp,
		DefaultActions: []elbtypes.Action{{Type: elbtypes.ActionTypeEnumForward, TargetGroupArn: tg.TargetGroups[0].TargetGroupArn}}, Tags: tags}); err != nil {
		t.Fatal(err)
	}
	return awssdk.ToString(lb.LoadBalancers[0].DNSName)
}

// review66bLB returns the fake's NLB with that DNS name.
func review66bLB(e *env, dns string) (awsfake.LoadBalancerView, bool) {
	for _, lb := range e.fake.LoadBalancers() {
		if lb.DNSName == dns {
			return lb, true
		}
	}
	return awsfake.LoadBalancerView{}, false
}

// review66bServedByOld builds backend name (the object a reload is about
// to replace), ensures svc through it and returns it with a weak pointer
// to it: once the caller drops it, nothing holds it, as after a reload
// that rebuilt the backend once the last call on the old object returned.
func review66bServedByOld(t *testing.T, e *env, name string, svc *corev1.Service, nodes []*corev1.Node) (*Cloud, weak.Pointer[LoadBalancer]) {
	t.Helper()
	old := review66bBackend(t, name, e.url)
	lbi, _ := old.LoadBalancer()
	if _, err := lbi.EnsureLoadBalancer(context.Background(), testCluster, svc, nodes); err != nil {
		t.Fatalf("Ensure in the old %s: %v", name, err)
	}
	return old, weak.Make(old.lb)
}

// TestReview66bRebuiltBackendStillHoldsTheUntaggedNLB: aws-1, alone,
// adopted upstream's NLB unchanged. One reload adds aws-2 in the same VPC
// and rebuilds aws-1 (its settings changed: a new object of the same
// name). Until the garbage collector takes the old object, aws-2 finds the
// NLB aws-1's (holderOf) and is refused; after it, the new aws-1 has not
// reconciled the Service yet (the reload's re-sync of thousands of
// Services takes minutes under the API budget), so aws-2's Ensure (a move
// of the Service, retried after the refusal) adopts the NLB and tags it as
// aws-2's. The operator expects a rebuild of aws-1 to change nothing about
// which backend holds its NLBs: aws-2 refused before and after the
// collection alike, as for an NLB aws-1 made (tagged), and the NLB left
// with aws-1.
func TestReview66bRebuiltBackendStillHoldsTheUntaggedNLB(t *testing.T) {
	e := newEnv(t)
	review66bIsolate(t) // e.cloud is not in it: the reload builds the new aws-1 after the old one served
	nodes := e.awsNodes(1, 2)
	svc := newService("web", withAnnotation(AnnotationTargetType, targetInstance))
	ctx := context.Background()
	upstreamNLB(t, e, svc, instanceID(1), instanceID(2))
	old, oldA := review66bServedByOld(t, e, "aws-1", svc, nodes)
	if got := e.onlyLB(t).Tags[tagBackend]; got != "" {
		t.Fatalf("setup: the old aws-1, alone, tagged the adopted NLB %s=%q", tagBackend, got)
	}
	// The reload: a new aws-1 (same name, VPC and region) while the old
	// object is still live, and aws-2 beside it.
	rebuilt := review66bBackend(t, "aws-1", e.url)
	other := review66bBackend(t, "aws-2", e.url)
	lbB, _ := other.LoadBalancer()
	if _, err := lbB.EnsureLoadBalancer(ctx, testCluster, svc, nodes); err == nil {
		t.Fatalf("setup: aws-2's Ensure while the old aws-1 object is live succeeded")
	}
	runtime.KeepAlive(old) // the reload's last call on it returns; from here on only the registry's weak pointer
	if !collected(oldA) {
		t.Skip("the old aws-1 object was not collected")
	}
	e.fake.ResetCalls()
	_, err := lbB.EnsureLoadBalancer(ctx, testCluster, svc, nodes)
	if ue, ok := backends.AsUserError(err); !ok || ue.Reason != reasonNameConflict {
		t.Errorf("aws-2's Ensure after aws-1 was rebuilt (the old object collected): %v, want a %s user error as before the collection; mutating calls %v",
			err, reasonNameConflict, e.fake.MutatingCalls())
	}
	if got := e.onlyLB(t).Tags[tagBackend]; got == "aws-2" {
		t.Errorf("the NLB aws-1 serves the Service with is now tagged %s=aws-2", tagBackend)
	}
	lbA, _ := rebuilt.LoadBalancer()
	if err := lbA.UpdateLoadBalancer(ctx, testCluster, svc, nodes); err != nil {
		t.Errorf("the rebuilt aws-1's node sync (the reload's re-sync) of its own Service: %v", err)
	}
	runtime.KeepAlive(other)
	runtime.KeepAlive(rebuilt)
}

// TestReview66bHoldsSurviveDryRunsAndAnotherServicesDelete: aws-1, alone,
// adopted two Services' upstream NLBs (web, api); a reload adds aws-2 in
// the same VPC. Before aws-1 reconciles them again: a plan's dry-run
// delete and Ensure of web by aws-1 must not change what aws-1 holds (no
// dry run changes memory), and aws-1's real delete of api must release
// api's NLB only. The operator expects aws-2 refused for web (naming
// aws-1), reporting nothing for it (GetLoadBalancer), and its delete
// leaving web's NLB. Passes when the holds are per Service and dry runs
// leave them.
func TestReview66bHoldsSurviveDryRunsAndAnotherServicesDelete(t *testing.T) {
	e := newEnv(t)
	review66bIsolate(t, e.cloud)
	nodes := e.awsNodes(1, 2)
	web := newService("web", withAnnotation(AnnotationTargetType, targetInstance))
	api := newService("api", withAnnotation(AnnotationTargetType, targetInstance))
	ctx := context.Background()
	webDNS := review66bUpstreamNLB(t, e, web, "k8s-default-web-0a1b2c3d4e", instanceID(1), instanceID(2))
	apiDNS := review66bUpstreamNLB(t, e, api, "k8s-default-api-0a1b2c3d4e", instanceID(1), instanceID(2))
	e.ensure(t, web, nodes)
	e.ensure(t, api, nodes)
	lbA, _ := e.cloud.LoadBalancer()
	other := review66bBackend(t, "aws-2", e.url) // a reload adds aws-2
	lbB, _ := other.LoadBalancer()

	dctx, _ := backends.WithDryRun(ctx)
	if err := lbA.EnsureLoadBalancerDeleted(dctx, testCluster, web); err != nil {
		t.Fatalf("aws-1's dry-run delete of web: %v", err)
	}
	if _, err := lbA.EnsureLoadBalancer(dctx, testCluster, web, nodes); err != nil {
		t.Fatalf("aws-1's dry-run Ensure of web: %v", err)
	}
	if err := lbA.EnsureLoadBalancerDeleted(ctx, testCluster, api); err != nil {
		t.Fatalf("aws-1's delete of api: %v", err)
	}
	if _, ok := review66bLB(e, apiDNS); ok {
		t.Fatalf("setup: api's NLB %s is left after aws-1 deleted api", apiDNS)
	}

	e.fake.ResetCalls()
	_, err := lbB.EnsureLoadBalancer(ctx, testCluster, web, nodes)
	if ue, ok := backends.AsUserError(err); !ok || ue.Reason != reasonNameConflict || !strings.Contains(err.Error(), `"aws-1"`) {
		t.Errorf("aws-2's Ensure of web after aws-1's dry runs and its delete of api: %v, want a %s user error naming aws-1", err, reasonNameConflict)
	}
	if _, exists, err := lbB.GetLoadBalancer(ctx, testCluster, web); err != nil || exists {
		t.Errorf("aws-2's GetLoadBalancer of web: exists %v, %v; want aws-1's NLB not reported", exists, err)
	}
	if err := lbB.EnsureLoadBalancerDeleted(ctx, testCluster, web); err != nil {
		t.Errorf("aws-2's delete of web: %v", err)
	}
	e.assertNoMutation(t, "aws-2's Ensure, GetLoadBalancer and delete of web")
	if _, ok := review66bLB(e, webDNS); !ok {
		t.Errorf("web's NLB %s, which aws-1 serves, is gone after aws-2's refused Ensure and its delete", webDNS)
	}
	runtime.KeepAlive(other)
}

// TestReview66bBackendsOfOtherVPCsAndRegionsDoNotInterfere: aws-1 adopts
// upstream's NLB while aws-3 (another VPC of the region) and aws-4 (the
// same VPC ID, another region's settings) are configured. Neither shares
// aws-1's VPC and region: the operator expects aws-1 alone there (the
// adoption makes no change, no AddTags, and its node sync keeps the
// verified fast path), and aws-3 (a move to VPC B: its own NLB, upstream's
// name not being ours) neither tagging nor deleting upstream's NLB. Passes
// when sharesVPC and holderOf compare VPC and region.
func TestReview66bBackendsOfOtherVPCsAndRegionsDoNotInterfere(t *testing.T) {
	e := newEnv(t)
	review66bIsolate(t, e.cloud)
	const vpcB = "vpc-0b2"
	e.fake.AddVPC(vpcB, "10.1.0.0/16")
	for i, z := range []string{"a", "b"} {
		e.fake.AddSubnet(awsfake.Subnet{ID: "subnet-2" + z, VPCID: vpcB, Zone: testRegion + z, ZoneID: fmt.Sprintf("euw1-az%d", i+1),
			CIDR: fmt.Sprintf("10.1.%d.0/24", i), Tags: map[string]string{tagRoleELB: "1", "Name": "public-b-" + z}})
	}
	otherVPC := review66bBackend(t, "aws-3", e.url, func(s *Settings) { s.VPC = vpcB })
	otherRegion := review66bBackend(t, "aws-4", e.url, func(s *Settings) { s.Region = "eu-central-1" })
	nodes := e.awsNodes(1, 2)
	svc := newService("web", withAnnotation(AnnotationTargetType, targetInstance))
	ctx := context.Background()
	dns := upstreamNLB(t, e, svc, instanceID(1), instanceID(2))
	e.fake.ResetCalls()
	e.ensure(t, svc, nodes)
	e.assertNoMutation(t, "aws-1's adoption with backends of other VPCs and regions configured")
	lbA, _ := e.cloud.LoadBalancer()
	e.fake.ResetCalls()
	if err := lbA.UpdateLoadBalancer(ctx, testCluster, svc, nodes); err != nil {
		t.Fatalf("aws-1's node sync: %v", err)
	}
	if got := e.fake.TotalCalls(); got != 0 {
		t.Errorf("aws-1's node sync with the same nodes made %d calls %v, want none (the verified fast path)", got, e.fake.CallCounts())
	}
	// aws-3 (a move of the Service to VPC B) makes its own NLB (of our
	// name: upstream's name is not ours, so nothing collides) and its delete
	// (the move undone) deletes that one: upstream's NLB stays aws-1's.
	lb3, _ := otherVPC.LoadBalancer()
	if _, err := lb3.EnsureLoadBalancer(ctx, testCluster, svc, nodes); err != nil {
		t.Logf("aws-3's (VPC %s) Ensure: %v", vpcB, err)
	}
	if err := lb3.EnsureLoadBalancerDeleted(ctx, testCluster, svc); err != nil {
		t.Errorf("aws-3's delete: %v", err)
	}
	if got, ok := review66bLB(e, dns); !ok || got.Tags[tagBackend] != "" {
		t.Errorf("after aws-3's Ensure and delete, upstream's NLB %s: found %v, tagged %s=%q; want it kept, untagged", dns, ok, tagBackend, got.Tags[tagBackend])
	}
	e.fake.ResetCalls()
	if err := lbA.UpdateLoadBalancer(ctx, testCluster, svc, nodes); err != nil {
		t.Errorf("aws-1's node sync after aws-3's Ensure and delete: %v", err)
	}
	e.assertNoMutation(t, "aws-1's node sync (same nodes) after aws-3's Ensure and delete")
	runtime.KeepAlive(otherVPC)
	runtime.KeepAlive(otherRegion)
}

// TestReview66bRestartThenTheServingBackendsNodeSyncTagsFirst: aws-1
// adopted upstream's NLB in an earlier run of the process (untagged: it
// was alone then), and aws-1 and aws-2 (same VPC) start with empty memory.
// The first call for the Service is aws-1's node sync (upstream's node
// sync, or the router's re-sync, before any Ensure): the operator expects
// it to tag the NLB as aws-1's (no verified view after a restart: the
// whole path, claim included), so that aws-2 is then refused and its
// delete (a drain's end, an undone move) leaves the NLB. Passes when the
// node sync's slow path claims.
func TestReview66bRestartThenTheServingBackendsNodeSyncTagsFirst(t *testing.T) {
	e := newEnv(t)
	review66bIsolate(t, e.cloud)
	nodes := e.awsNodes(1, 2)
	svc := newService("web", withAnnotation(AnnotationTargetType, targetInstance))
	ctx := context.Background()
	dns := upstreamNLB(t, e, svc, instanceID(1), instanceID(2)) // adopted unchanged by the earlier run's aws-1
	other := review66bBackend(t, "aws-2", e.url)                // the new run: aws-1 (e.cloud) and aws-2
	lbA, _ := e.cloud.LoadBalancer()
	lbB, _ := other.LoadBalancer()
	if err := lbA.UpdateLoadBalancer(ctx, testCluster, svc, nodes); err != nil {
		t.Fatalf("aws-1's first node sync after the restart: %v", err)
	}
	if got := e.onlyLB(t).Tags[tagBackend]; got != "aws-1" {
		t.Errorf("after aws-1's first node sync since the restart, the NLB's %s tag is %q, want aws-1", tagBackend, got)
	}
	e.fake.ResetCalls()
	if _, err := lbB.EnsureLoadBalancer(ctx, testCluster, svc, nodes); err == nil {
		t.Errorf("aws-2's Ensure after aws-1's node sync succeeded on aws-1's NLB")
	}
	if err := lbB.EnsureLoadBalancerDeleted(ctx, testCluster, svc); err != nil {
		t.Errorf("aws-2's delete: %v", err)
	}
	e.assertNoMutation(t, "aws-2's Ensure and delete")
	if got := e.onlyLB(t); got.DNSName != dns {
		t.Errorf("NLB %s, want aws-1's adopted %s", got.DNSName, dns)
	}
	runtime.KeepAlive(other)
}

// TestReview66bConcurrentEnsuresOfTwoBackendsOfOneVPC: aws-1 and aws-2
// (same VPC) are handed the same Service at once, each Service's NLB
// upstream's and untagged (a Service listed on both backends, or a move
// racing a node sync outside the router's per-Service lock). The operator
// expects one of them to serve it and the other refused: never both
// adopting (both tag it, the last tag wins, and the loser's delete at a
// drain's end deletes the NLB the other serves). Run with -race.
func TestReview66bConcurrentEnsuresOfTwoBackendsOfOneVPC(t *testing.T) {
	e := newEnv(t)
	review66bIsolate(t, e.cloud)
	other := review66bBackend(t, "aws-2", e.url)
	nodes := e.awsNodes(1, 2)
	lbA, _ := e.cloud.LoadBalancer()
	lbB, _ := other.LoadBalancer()
	ctx := context.Background()
	for i := range 12 {
		svc := newService("web", withAnnotation(AnnotationTargetType, targetInstance))
		svc.Name = "web" + string(rune('a'+i))
		svc.UID += types.UID("-" + svc.Name[3:])
		dns := review66bUpstreamNLB(t, e, svc, "k8s-default-"+svc.Name+"-0a1b2c3d4e", instanceID(1), instanceID(2))
		var wg sync.WaitGroup
		var errA, errB error
		wg.Add(2)
		go func() { defer wg.Done(); _, errA = lbA.EnsureLoadBalancer(ctx, testCluster, svc.DeepCopy(), nodes) }()
		go func() { defer wg.Done(); _, errB = lbB.EnsureLoadBalancer(ctx, testCluster, svc.DeepCopy(), nodes) }()
		wg.Wait()
		lb, _ := review66bLB(e, dns)
		switch {
		case errA == nil && errB == nil:
			t.Errorf("%s: aws-1 and aws-2 both adopted upstream's NLB at once (tagged %q)", svc.Name, lb.Tags[tagBackend])
		case errA != nil && errB != nil:
			t.Errorf("%s: both refused: aws-1 %v; aws-2 %v", svc.Name, errA, errB)
		case errA == nil && lb.Tags[tagBackend] != "aws-1", errB == nil && lb.Tags[tagBackend] != "aws-2":
			t.Errorf("%s: the NLB is tagged %q, not as the backend that served it (aws-1: %v, aws-2: %v)", svc.Name, lb.Tags[tagBackend], errA, errB)
		}
	}
	runtime.KeepAlive(other)
}
