package aws

import (
	"context"
	"fmt"
	"strings"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// editService changes the Service as a user would (kubectl edit).
func editService(t *testing.T, client *fake.Clientset, name string, change func(*corev1.Service)) {
	t.Helper()
	ctx := context.Background()
	s, err := client.CoreV1().Services("default").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	change(s)
	if _, err := client.CoreV1().Services("default").Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// handMadeListener adds an untagged listener, as someone would by hand,
// on port of the NLB lbARN forwarding to the target group tgARN (whose
// protocol it takes).
func handMadeListener(t *testing.T, e *env, lbARN string, port int32, tgARN string) string {
	t.Helper()
	out, err := e.cloud.lb.elb.CreateListener(context.Background(), &elbv2.CreateListenerInput{LoadBalancerArn: awssdk.String(lbARN), Port: awssdk.Int32(port),
		Protocol: elbtypes.ProtocolEnum(protocolOf(e, tgARN)), DefaultActions: []elbtypes.Action{{Type: elbtypes.ActionTypeEnumForward, TargetGroupArn: awssdk.String(tgARN)}}})
	if err != nil {
		t.Fatal(err)
	}
	return awssdk.ToString(out.Listeners[0].ListenerArn)
}

func protocolOf(e *env, tgARN string) string {
	for _, g := range e.fake.TargetGroups() {
		if g.ARN == tgARN {
			return g.Protocol
		}
	}
	return "TCP"
}

// tagsOf returns the tags of an ELBv2 resource.
func tagsOf(t *testing.T, e *env, arn string) map[string]string {
	t.Helper()
	out, err := e.cloud.lb.elb.DescribeTags(context.Background(), &elbv2.DescribeTagsInput{ResourceArns: []string{arn}})
	if err != nil {
		t.Fatal(err)
	}
	return tagMaps(out)[arn]
}

// TestHandMadeListenerToServiceGroupIsKept: a listener someone added by
// hand (untagged) to the Service's NLB, on a port the Service does not
// have, forwarding to the Service's OWN target group, is a stranger: the
// backend changes and deletes only listeners tagged as the Service's. The
// upstream service controller drives it: an annotation change (an Ensure)
// leaves it; a port change moves the Service's own listener (tagged) to
// the new port and keeps the old target group while the hand-made listener
// still forwards to it; the Service's deletion takes it with the NLB and
// leaves nothing. Before, the first Ensure deleted it as drift.
func TestHandMadeListenerToServiceGroupIsKept(t *testing.T) {
	e := newEnv(t)
	client := testutil.NewClientset()
	runServiceController(t, e.cloud, client)
	svc := newService("web", withAnnotation(AnnotationTargetType, targetInstance))
	if _, err := client.CoreV1().Services("default").Create(context.Background(), svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	n := namesFor(testCluster, svc)
	tg80 := n.targetGroup(80, "TCP", targetInstance)
	eventually(t, "the NLB with its listener", func() error {
		if lbs := e.fake.LoadBalancers(); len(lbs) != 1 || strings.Join(lbs[0].Listeners, ",") != "TCP:80->"+tg80 {
			return fmt.Errorf("load balancers %+v", lbs)
		}
		return nil
	})
	createNodes(t, client, e.awsNodes(1, 2)...)
	eventually(t, "the nodes are targets", func() error {
		if g := e.targetGroups(t)[tg80]; len(g.Targets) != 2 {
			return fmt.Errorf("targets %v", g.Targets)
		}
		return nil
	})
	theirs := handMadeListener(t, e, e.onlyLB(t).ARN, 9000, e.targetGroups(t)[tg80].ARN)

	// Tags are the last step of an Ensure: once the NLB has them, the
	// listeners were reconciled.
	editService(t, client, "web", func(s *corev1.Service) { s.Annotations[string(AnnotationAdditionalTags)] = "team=web" })
	eventually(t, "the NLB tagged by an Ensure", func() error {
		if v := e.onlyLB(t).Tags["team"]; v != "web" {
			return fmt.Errorf("tag team=%q", v)
		}
		return nil
	})
	if got, want := strings.Join(e.onlyLB(t).Listeners, ","), "TCP:80->"+tg80+",TCP:9000->"+tg80; got != want {
		t.Fatalf("listeners after an Ensure = %s, want %s (the hand-made one kept)", got, want)
	}
	if tags := tagsOf(t, e, theirs); len(tags) != 0 {
		t.Errorf("the hand-made listener was tagged %v, want no tags", tags)
	}
	if v := e.targetGroups(t)[tg80].Tags["team"]; v != "web" {
		t.Errorf("the Service's target group has tag team=%q, want web", v)
	}

	editService(t, client, "web", func(s *corev1.Service) { s.Spec.Ports[0].Port = 81 })
	tg81 := n.targetGroup(81, "TCP", targetInstance)
	eventually(t, "the Service's listener moved to port 81, the hand-made one kept", func() error {
		if got, want := strings.Join(e.onlyLB(t).Listeners, ","), "TCP:81->"+tg81+",TCP:9000->"+tg80; got != want {
			return fmt.Errorf("listeners %s, want %s", got, want)
		}
		return nil
	})
	deleteService(t, client, "web")
	eventually(t, "nothing left in AWS", func() error {
		if c := e.fake.ResourceCount(); c != 0 {
			return fmt.Errorf("%d resources left", c)
		}
		return nil
	})
}

// TestAdoptedPortChangeMovesListener: an NLB the upstream provider made is
// adopted with its listener; the Service's port then changes (80 to 8080)
// through the upstream service controller. Upstream (since v1.23) tags its
// listeners as the NLB, the Service's: the listener moves to the new port
// (the backend's group, with the nodes), and upstream's group goes. A
// listener of an older upstream carries no tags: it is a stranger like one
// made by hand, left on its port with the group it forwards to, and the
// Service's new port gets the backend's listener beside it.
func TestAdoptedPortChangeMovesListener(t *testing.T) {
	for _, tc := range []struct {
		name     string
		untagged bool
		want     func(ours string) string
		upstream bool
	}{
		{"upstream tags its listeners", false, func(ours string) string { return "TCP:8080->" + ours }, false},
		{"an upstream before v1.23 did not", true, func(ours string) string { return "TCP:80->k8s-default-web-0a1b2c3d4e,TCP:8080->" + ours }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			svc := newService("web", withAnnotation(AnnotationTargetType, targetInstance))
			nodes := e.awsNodes(1, 2)
			dns := upstreamNLB(t, e, svc, instanceID(1), instanceID(2))
			if tc.untagged {
				lb := e.onlyLB(t)
				out, err := e.cloud.lb.elb.DescribeListeners(context.Background(), &elbv2.DescribeListenersInput{LoadBalancerArn: awssdk.String(lb.ARN)})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := e.cloud.lb.elb.RemoveTags(context.Background(), &elbv2.RemoveTagsInput{ResourceArns: []string{awssdk.ToString(out.Listeners[0].ListenerArn)},
					TagKeys: []string{tagService, tagClusterPrefix + testCluster}}); err != nil {
					t.Fatal(err)
				}
			}
			svc.Finalizers = []string{"service.kubernetes.io/load-balancer-cleanup"}
			svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{Hostname: dns}}
			// The nodes join once the Service's first sync is done (see
			// TestAdoptUpstreamNLB).
			client := testutil.NewClientset(svc)
			runServiceController(t, e.cloud, client)
			(&annotated{t: t, e: e, client: client, svc: svc}).event(corev1.EventTypeNormal, "EnsuredLoadBalancer")
			createNodes(t, client, nodes...)
			eventually(t, "the nodes are targets of upstream's group", func() error {
				if g := e.targetGroups(t)["k8s-default-web-0a1b2c3d4e"]; len(g.Targets) != 2 {
					return fmt.Errorf("targets %v", g.Targets)
				}
				return nil
			})
			ours := namesFor(testCluster, svc).targetGroup(8080, "TCP", targetInstance)
			editService(t, client, "web", func(s *corev1.Service) { s.Spec.Ports[0].Port = 8080 })
			eventually(t, "the listeners after the port change", func() error {
				if got, want := strings.Join(e.onlyLB(t).Listeners, ","), tc.want(ours); got != want {
					return fmt.Errorf("listeners %s, want %s", got, want)
				}
				if g := e.targetGroups(t)[ours]; len(g.Targets) != 2 {
					return fmt.Errorf("targets of %s: %v", ours, g.Targets)
				}
				if _, kept := e.targetGroups(t)["k8s-default-web-0a1b2c3d4e"]; kept != tc.upstream {
					return fmt.Errorf("upstream's group kept: %v, want %v", kept, tc.upstream)
				}
				return nil
			})
			if lb := e.onlyLB(t); lb.DNSName != dns {
				t.Errorf("NLB %s, want the upstream one %s kept", lb.DNSName, dns)
			}
			deleteService(t, client, "web")
			eventually(t, "nothing left in AWS", func() error {
				if c := e.fake.ResourceCount(); c != 0 {
					return fmt.Errorf("%d resources left", c)
				}
				return nil
			})
		})
	}
}

// TestStrangerOnServicePortIsAUserError: a listener made by hand on one of
// the Service's ports (the Service's own deleted), forwarding elsewhere, is
// never changed: Ensure reports a LoadBalancerListenerNotOurs user error
// naming the port and both ways out, with no change to the listener; once
// it is deleted, Ensure makes the Service's.
func TestStrangerOnServicePortIsAUserError(t *testing.T) {
	e := newEnv(t)
	nodes := e.awsNodes(1, 2)
	svc := newService("web", withAnnotation(AnnotationTargetType, targetInstance))
	e.ensure(t, svc, nodes)
	ctx := context.Background()
	lb := e.onlyLB(t)
	out, err := e.cloud.lb.elb.DescribeListeners(ctx, &elbv2.DescribeListenersInput{LoadBalancerArn: awssdk.String(lb.ARN)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.cloud.lb.elb.DeleteListener(ctx, &elbv2.DeleteListenerInput{ListenerArn: out.Listeners[0].ListenerArn}); err != nil {
		t.Fatal(err)
	}
	theirs := handMadeTG(t, e, lb.ARN, 80)
	want := strings.Join(e.onlyLB(t).Listeners, ",")
	lbi, _ := e.cloud.LoadBalancer()
	e.fake.ResetCalls()
	_, err = lbi.EnsureLoadBalancer(ctx, testCluster, svc, nodes)
	ue, ok := backends.AsUserError(err)
	if !ok || ue.Reason != reasonListenerNotOurs || !containsAll(err.Error(), []string{"port 80", "Delete it", "tag it", tagService + "=default/web"}) {
		t.Fatalf("Ensure beside a stranger on port 80 = %v, want a %s user error naming the port and the fixes", err, reasonListenerNotOurs)
	}
	if got := strings.Join(e.onlyLB(t).Listeners, ","); got != want || e.fake.Calls("ModifyListener")+e.fake.Calls("DeleteListener") != 0 || !hasTG(e, theirs) {
		t.Errorf("listeners %s (want %s), calls %v: the stranger was touched", got, want, e.fake.CallCounts())
	}
	out, err = e.cloud.lb.elb.DescribeListeners(ctx, &elbv2.DescribeListenersInput{LoadBalancerArn: awssdk.String(lb.ARN)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.cloud.lb.elb.DeleteListener(ctx, &elbv2.DeleteListenerInput{ListenerArn: out.Listeners[0].ListenerArn}); err != nil {
		t.Fatal(err)
	}
	e.ensure(t, svc, nodes)
	if got, want := strings.Join(e.onlyLB(t).Listeners, ","), "TCP:80->"+namesFor(testCluster, svc).targetGroup(80, "TCP", targetInstance); got != want {
		t.Errorf("listeners after the stranger went = %s, want %s", got, want)
	}
}
