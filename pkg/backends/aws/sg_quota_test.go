package aws

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/multicloud-ccm/multicloud-ccm/internal/awsfake"
	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// quotaEnv is a backend whose instances all have one security group
// (nodes, with the user's one rule) under a rules-per-group quota.
type quotaEnv struct {
	*env
	nodes string
	kube  []*corev1.Node
}

// newQuotaEnv makes two instances in the security group nodes and sets
// the fake's "Inbound or outbound rules per security group" quota.
func newQuotaEnv(t *testing.T, quota int) *quotaEnv {
	t.Helper()
	e := &quotaEnv{env: newEnv(t)}
	e.nodes = userSG(t, e.env, "nodes")
	for i := 1; i <= 2; i++ {
		in := e.addInstance(i, func(in *awsfake.Instance) { in.SecurityGroups = []string{e.nodes} })
		e.kube = append(e.kube, newNode(in.PrivateDNSName, testutil.WithProviderID(providerID(in.Zone, in.ID)), testutil.WithInternalIP(in.PrivateIPs[0])))
	}
	e.fake.SetRulesPerSecurityGroup(quota)
	return e
}

// quotaService is an instance-target Service with one TCP port on
// NodePort 30080+n: one rule in the nodes' group.
func quotaService(n int) *corev1.Service {
	return newService(fmt.Sprintf("s%d", n), withAnnotation(AnnotationTargetType, targetInstance), func(s *corev1.Service) {
		s.Spec.Ports[0].NodePort = int32(30080 + n) //nolint:gosec // a small test number.
	})
}

// rulesFrom returns the nodes' group's rules whose source is the Service's
// own security group ("" when it has none).
func (e *quotaEnv) rulesFrom(svc *corev1.Service) []string {
	var own string
	for _, sg := range e.fake.SecurityGroups() {
		if sg.Tags[tagService] == svc.Namespace+"/"+svc.Name {
			own = sg.ID
		}
	}
	var out []string
	for _, r := range e.fake.SecurityGroupIngress(e.nodes) {
		if own != "" && strings.HasSuffix(r, ":"+own) {
			out = append(out, r)
		}
	}
	return out
}

// quotaErrorParts are what the user error must name besides the group.
func quotaErrorParts(group string) []string {
	return []string{group, `"Inbound or outbound rules per security group"`, "Service Quotas", "1,000",
		string(AnnotationManageBackendSGRules) + `: "false"`, "NodePort range", string(AnnotationTargetType) + ": ip", codeRulesPerGroup}
}

// TestInstanceSecurityGroupRulesQuota: with the nodes' group allowed 4
// rules (the user's one and one per single-port instance-target Service),
// three Services get their NLBs; the fourth gets a user error
// (SecurityGroupRulesQuotaExceeded) naming the full group, the quota and
// the fixes, and has only its own security group in AWS, which a retry
// reuses (no second group, no duplicate rule); the first three keep
// their rules, one of them given a new port keeps its listeners, and one
// whose NodePort changes has its rule moved.
// Deleting one frees its rule and the fourth's retry then succeeds;
// deleting a Service stopped at the quota removes its group.
func TestInstanceSecurityGroupRulesQuota(t *testing.T) {
	e := newQuotaEnv(t, 4)
	ctx := context.Background()
	for n := 1; n <= 3; n++ {
		e.ensure(t, quotaService(n), e.kube)
	}
	if got := len(e.fake.SecurityGroupIngress(e.nodes)); got != 4 {
		t.Fatalf("nodes' group has %d rules, want 4", got)
	}
	before := e.fake.ResourceCount()
	over := quotaService(4)
	_, err := e.cloud.lb.EnsureLoadBalancer(ctx, testCluster, over, e.kube)
	ue, ok := backends.AsUserError(err)
	if !ok || ue.Reason != reasonSGRulesQuota || !containsAll(err.Error(), append(quotaErrorParts(e.nodes), "tcp/30084")) {
		t.Fatalf("the Service over the quota: %v, want a %s user error naming %v", err, reasonSGRulesQuota, quotaErrorParts(e.nodes))
	}
	// Only its own security group was made (the rules step comes first).
	if got := e.fake.ResourceCount(); got != before+1 || len(e.fake.LoadBalancers()) != 3 || len(e.rulesFrom(over)) != 0 {
		t.Fatalf("%d resources (%d before), %d NLBs, rules %v; want only the Service's security group more", got, before, len(e.fake.LoadBalancers()), e.rulesFrom(over))
	}
	for n := 1; n <= 3; n++ {
		if got := e.rulesFrom(quotaService(n)); len(got) != 1 {
			t.Errorf("s%d: rules %v, want its NodePort's", n, got)
		}
	}
	e.fake.ResetCalls()
	if _, err := e.cloud.lb.EnsureLoadBalancer(ctx, testCluster, over, e.kube); !strings.Contains(fmt.Sprint(err), codeRulesPerGroup) {
		t.Fatalf("retry still over the quota: %v", err)
	}
	if c := e.fake.Calls("CreateSecurityGroup"); c != 0 || e.fake.ResourceCount() != before+1 {
		t.Fatalf("the retry made %d security groups, %d resources; want the same group", c, e.fake.ResourceCount())
	}

	// A Service that has its NLB and needs one more rule (a new port)
	// stops at the rules too: its listeners stay as they were.
	grown := quotaService(2)
	grown.Spec.Ports = append(grown.Spec.Ports, corev1.ServicePort{Name: "https", Protocol: corev1.ProtocolTCP, Port: 443, NodePort: 30092})
	if _, err := e.cloud.lb.EnsureLoadBalancer(ctx, testCluster, grown, e.kube); !containsAll(fmt.Sprint(err), []string{codeRulesPerGroup, "tcp/30092"}) {
		t.Fatalf("a new port in a full group: %v, want the quota error", err)
	}
	if got := e.onlyLBOf(t, grown).Listeners; len(got) != 1 {
		t.Fatalf("listeners %v after the refused rule, want the one there was", got)
	}
	// A changed NodePort fits in a full group: the old rule goes first.
	moved := quotaService(3)
	moved.Spec.Ports[0].NodePort = 30093
	e.ensure(t, moved, e.kube)
	if got := e.rulesFrom(moved); len(got) != 1 || !strings.HasPrefix(got[0], "tcp:30093-30093:") {
		t.Fatalf("s3 moved to NodePort 30093: rules %v", got)
	}

	if err := e.cloud.lb.EnsureLoadBalancerDeleted(ctx, testCluster, quotaService(1)); err != nil {
		t.Fatal(err)
	}
	e.ensure(t, over, e.kube)
	if got := e.rulesFrom(over); strings.Join(got, ",") != "tcp:30084-30084:"+e.onlyLBOf(t, over).SecurityGroups[0] {
		t.Fatalf("after room was made: rules %v", got)
	}
	if got := len(e.fake.SecurityGroupIngress(e.nodes)); got != 4 {
		t.Fatalf("nodes' group has %d rules, want 4", got)
	}

	stopped := quotaService(5)
	if _, err := e.cloud.lb.EnsureLoadBalancer(ctx, testCluster, stopped, e.kube); !strings.Contains(fmt.Sprint(err), codeRulesPerGroup) {
		t.Fatalf("a fifth Service: %v, want the quota error", err)
	}
	if _, exists, err := e.cloud.lb.GetLoadBalancer(ctx, testCluster, stopped); err != nil || !exists {
		t.Fatalf("GetLoadBalancer of a Service stopped at the quota: exists %v, %v; want true (upstream skips the delete otherwise)", exists, err)
	}
	for _, svc := range []*corev1.Service{stopped, quotaService(2), quotaService(3), over} {
		if err := e.cloud.lb.EnsureLoadBalancerDeleted(ctx, testCluster, svc); err != nil {
			t.Fatalf("delete %s: %v", svc.Name, err)
		}
	}
	if n := e.fake.ResourceCount(); n != 1 || strings.Join(e.fake.SecurityGroupIngress(e.nodes), ",") != "tcp:443-443:10.0.0.0/8" {
		t.Fatalf("%d resources left, nodes' rules %v; want only the nodes' group with the user's rule", n, e.fake.SecurityGroupIngress(e.nodes))
	}
}

// onlyLBOf returns the Service's NLB.
func (e *quotaEnv) onlyLBOf(t *testing.T, svc *corev1.Service) awsfake.LoadBalancerView {
	t.Helper()
	name := namesFor(testCluster, svc).lb
	for _, lb := range e.fake.LoadBalancers() {
		if lb.Name == name {
			return lb
		}
	}
	t.Fatalf("no NLB %s", name)
	return awsfake.LoadBalancerView{}
}

// TestServiceControllerSecurityGroupRulesQuota drives the upstream service
// controller: a Service whose rule does not fit in the nodes' group gets a
// Warning event naming the group, the quota and the fixes, and no status;
// deleting the Service whose rule filled the group lets the controller's
// retry give the waiting Service its NLB; deleting it leaves only the
// nodes' group with the user's rule.
func TestServiceControllerSecurityGroupRulesQuota(t *testing.T) {
	e := newQuotaEnv(t, 2)
	client := testutil.NewClientset()
	ctx := context.Background()
	runServiceController(t, e.cloud, client)
	first, second := quotaService(1), quotaService(2)
	startAnnotatedOn(t, e.env, client, first)
	// The nodes join once the Service is handled (see
	// TestServiceControllerCrashBeforeStatus for why); the node sync adds
	// its rule, which fills the group.
	createNodes(t, client, e.kube...)
	eventually(t, "the first Service's rule in the nodes' group", func() error {
		if got := e.rulesFrom(first); len(got) != 1 {
			return fmt.Errorf("rules %v", got)
		}
		return nil
	})
	if _, err := client.CoreV1().Services("default").Create(ctx, second, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	warned(t, client, second.Name, quotaErrorParts(e.nodes)...)
	if s, err := client.CoreV1().Services("default").Get(ctx, second.Name, metav1.GetOptions{}); err != nil || len(s.Status.LoadBalancer.Ingress) != 0 {
		t.Fatalf("the Service over the quota: status %+v (%v), want none", s.Status, err)
	}
	deleteService(t, client, first.Name)
	eventually(t, "the second Service gets its NLB once the first is gone", func() error {
		s, err := client.CoreV1().Services("default").Get(ctx, second.Name, metav1.GetOptions{})
		if err != nil || len(s.Status.LoadBalancer.Ingress) == 0 {
			return fmt.Errorf("no ingress yet (%w)", err)
		}
		if got := e.rulesFrom(second); len(got) != 1 || len(e.fake.LoadBalancers()) != 1 {
			return fmt.Errorf("rules %v, %d NLBs", got, len(e.fake.LoadBalancers()))
		}
		return nil
	})
	deleteService(t, client, second.Name)
	eventually(t, "everything of the Services gone", func() error {
		if n := e.fake.ResourceCount(); n != 1 || strings.Join(e.fake.SecurityGroupIngress(e.nodes), ",") != "tcp:443-443:10.0.0.0/8" {
			return fmt.Errorf("%d resources, nodes' rules %v", n, e.fake.SecurityGroupIngress(e.nodes))
		}
		return nil
	})
}

// warned waits for a Warning event on the Service whose message contains
// every string in want.
func warned(t *testing.T, client *fake.Clientset, service string, want ...string) {
	t.Helper()
	eventually(t, fmt.Sprintf("a Warning event on %s containing %q", service, want), func() error {
		evs, err := client.CoreV1().Events("").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, ev := range evs.Items {
			if ev.Type == corev1.EventTypeWarning && ev.InvolvedObject.Name == service && containsAll(ev.Message, want) {
				return nil
			}
		}
		return fmt.Errorf("none among %d events", len(evs.Items))
	})
}

// cidrRanges returns n /24 CIDRs from 10.<first>.0.0.
func cidrRanges(first, n int) []string {
	var out []string
	for i := first; i < first+n; i++ {
		out = append(out, fmt.Sprintf("10.%d.%d.0/24", i/250, i%250))
	}
	return out
}

// TestOwnSecurityGroupRulesQuota: the NLB's own security group holds one
// rule per listener port and source range; at AWS's default quota of 60,
// 60 source ranges fit, 60 others replace them (the old ones are revoked
// first), and 61 are a user error (SecurityGroupRulesQuotaExceeded)
// naming the group, the quota and the fixes, the group's rules left as
// they were.
func TestOwnSecurityGroupRulesQuota(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	nodes := e.awsNodes(1, 2)
	svc := newService("web", testutil.WithSourceRanges(cidrRanges(0, 60)...))
	e.ensure(t, svc, nodes)
	own := e.onlyLB(t).SecurityGroups[0]
	if n := len(e.fake.SecurityGroupIngress(own)); n != 60 {
		t.Fatalf("%d rules, want 60", n)
	}
	svc = newService("web", testutil.WithSourceRanges(cidrRanges(100, 60)...))
	e.ensure(t, svc, nodes)
	if got := e.fake.SecurityGroupIngress(own); len(got) != 60 || !slices.Contains(got, "tcp:80-80:10.0.100.0/24") {
		t.Fatalf("after replacing the source ranges: %d rules %v", len(got), got)
	}
	before := e.fake.SecurityGroupIngress(own)
	_, err := e.cloud.lb.EnsureLoadBalancer(ctx, testCluster, newService("web", testutil.WithSourceRanges(cidrRanges(100, 61)...)), nodes)
	ue, ok := backends.AsUserError(err)
	if want := []string{own, "loadBalancerSourceRanges", `"Inbound or outbound rules per security group"`, "Service Quotas", string(AnnotationSecurityGroups), codeRulesPerGroup}; !ok || ue.Reason != reasonSGRulesQuota || !containsAll(err.Error(), want) {
		t.Fatalf("61 source ranges: %v, want a %s user error naming %v", err, reasonSGRulesQuota, want)
	}
	if got := e.fake.SecurityGroupIngress(own); !slices.Equal(got, before) {
		t.Fatalf("rules after the refused change: %v, want the 60 there were", got)
	}
}
