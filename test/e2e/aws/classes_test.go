package aws

import (
	"context"
	"fmt"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/test/e2e/framework"
)

// withFinalizer adds the cleanup-finalizer check to a Service condition:
// a classed Service carries our finalizer, not upstream's shared one.
func withFinalizer(cond framework.ServiceCondition) framework.ServiceCondition {
	return func(s *corev1.Service) (bool, string) {
		ok, seen := cond(s)
		return ok && framework.HasCleanupFinalizer(s), fmt.Sprintf("%s, finalizers %v", seen, s.Finalizers)
	}
}

// TestClassedServices: a Service with one of the config's classes is
// served by multicloud-ccm's own controller (upstream's skips every Service
// with a class): on AWS it gets an NLB, on bare metal a pool address, each
// with the cleanup finalizer and an EnsuredLoadBalancer event naming the
// backend (and the NLB's ARN); an edit moves nothing; a delete leaves
// nothing in the cloud.
func TestClassedServices(t *testing.T) {
	cp := env(t)
	ctx := ctxFor(t)
	for _, s := range []*corev1.Service{
		framework.NewLoadBalancerService(ns, "cls-aws", framework.WithLoadBalancerClass(awsClass)),
		framework.NewLoadBalancerService(ns, "cls-metal", framework.WithLoadBalancerClass(metalClass)),
	} {
		if _, err := framework.CreateService(ctx, cp.Client, s); err != nil {
			t.Fatal(err)
		}
	}
	framework.Eventually(t, settle, "cls-aws shows its NLB", framework.ServiceMatches(cp.Client, ns, "cls-aws", withFinalizer(ingressIsNLBOf("default/cls-aws"))))
	framework.Eventually(t, settle, "cls-metal has a pool address", framework.ServiceMatches(cp.Client, ns, "cls-metal", withFinalizer(ingressInPool)))
	arn := lbOf("default/cls-aws").ARN
	framework.Eventually(t, settle, "the EnsuredLoadBalancer event names the backend and the NLB",
		framework.EventWith(cp.Client, "Service", ns, "cls-aws", "EnsuredLoadBalancer", `backend "`+awsBackend+`"`, arn))
	framework.Eventually(t, settle, "the EnsuredLoadBalancer event names the bare-metal backend",
		framework.EventWith(cp.Client, "Service", ns, "cls-metal", "EnsuredLoadBalancer", `backend "`+metalBackend+`"`))
	metalIP := framework.IngressIPs(service(ctx, t, cp, "cls-metal"))[0]

	// Edited: nothing moves.
	for _, name := range []string{"cls-aws", "cls-metal"} {
		s := service(ctx, t, cp, name)
		s.Annotations = map[string]string{"example.com/owner": "team-a"}
		s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "https", Protocol: corev1.ProtocolTCP, Port: 443})
		if _, err := cp.Client.CoreV1().Services(ns).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	framework.Eventually(t, settle, "cls-aws's NLB has both listeners", func(context.Context) (bool, string, error) {
		lb := lbOf("default/cls-aws")
		return lb != nil && len(lb.Listeners) == 2, fmt.Sprintf("%+v", lb), nil
	})
	if lb := lbOf("default/cls-aws"); lb.ARN != arn {
		t.Errorf("the edit replaced the NLB: %s, was %s", lb.ARN, arn)
	}
	framework.Consistently(t, 2*repairPeriod, "cls-metal keeps its address", framework.ServiceMatches(cp.Client, ns, "cls-metal", ingressIs(metalIP)))

	for _, name := range []string{"cls-aws", "cls-metal"} {
		if err := cp.Client.CoreV1().Services(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, settle, name+" gone", framework.ServiceGone(cp.Client, ns, name))
	}
	if lb := lbOf("default/cls-aws"); lb != nil {
		t.Errorf("the NLB is left: %+v", lb)
	}
	for _, tg := range fake.TargetGroups() {
		if tg.Tags["kubernetes.io/service-name"] == "default/cls-aws" {
			t.Errorf("target group left: %+v", tg)
		}
	}
}

func ingressIs(ip string) framework.ServiceCondition {
	return func(s *corev1.Service) (bool, string) {
		ips := framework.IngressIPs(s)
		return len(ips) == 1 && ips[0] == ip, fmt.Sprintf("ingress %v", ips)
	}
}

func service(ctx context.Context, t *testing.T, cp *framework.ControlPlane, name string) *corev1.Service {
	t.Helper()
	s, err := cp.Client.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestForeignClassUntouched: a Service whose class is not in the config
// (another implementation's, as MetalLB's) gets nothing from us: no
// finalizer, no address, no annotation, no event.
func TestForeignClassUntouched(t *testing.T) {
	cp := env(t)
	ctx := ctxFor(t)
	if _, err := framework.CreateService(ctx, cp.Client, framework.NewLoadBalancerService(ns, "foreign", framework.WithLoadBalancerClass("example.com/other-lb"))); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cp.Client.CoreV1().Services(ns).Delete(context.Background(), "foreign", metav1.DeleteOptions{})
	})
	framework.Consistently(t, 3*repairPeriod, "the foreign-class Service untouched", func(ctx context.Context) (bool, string, error) {
		s, err := cp.Client.CoreV1().Services(ns).Get(ctx, "foreign", metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		evs, err := framework.Events(ctx, cp.Client, "Service", ns, "foreign")
		if err != nil {
			return false, err.Error(), nil
		}
		// The kube-apiserver's ClusterIP repair loop may record its own
		// Warning on a Service created while it runs (cold CI run E):
		// not ours.
		evs = framework.NotFromAPIServer(evs)
		seen := fmt.Sprintf("finalizers %v, ingress %v, annotations %v, events %s", s.Finalizers, s.Status.LoadBalancer.Ingress, s.Annotations, framework.DescribeEvents(evs))
		return len(s.Finalizers) == 0 && len(s.Status.LoadBalancer.Ingress) == 0 && len(s.Annotations) == 0 && len(evs) == 0, seen, nil
	})
}

// elbClient reaches the fake over the wire, as an operator's AWS CLI would.
func elbClient() *elbv2.Client {
	return elbv2.New(elbv2.Options{Region: region, BaseEndpoint: awssdk.String(fake.URL),
		Credentials: credentials.NewStaticCredentialsProvider("AKIDE2EFAKE", "e2e-fake-secret", "")})
}

// TestDriftRepair: what is changed behind the CCM's back on a classed
// Service's load balancer is repaired by the next pass, with a
// LoadBalancerDriftRepaired event; with nothing changed, passes make no
// mutating call.
func TestDriftRepair(t *testing.T) {
	cp := env(t)
	ctx := ctxFor(t)
	for _, s := range []*corev1.Service{
		framework.NewLoadBalancerService(ns, "drift-aws", framework.WithLoadBalancerClass(awsClass)),
		framework.NewLoadBalancerService(ns, "drift-metal", framework.WithLoadBalancerClass(metalClass)),
	} {
		if _, err := framework.CreateService(ctx, cp.Client, s); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cp.Client.CoreV1().Services(ns).Delete(context.Background(), s.Name, metav1.DeleteOptions{})
		})
	}
	framework.Eventually(t, settle, "drift-aws shows its NLB", framework.ServiceMatches(cp.Client, ns, "drift-aws", ingressIsNLBOf("default/drift-aws")))
	framework.Eventually(t, settle, "drift-metal has a pool address", framework.ServiceMatches(cp.Client, ns, "drift-metal", ingressInPool))

	// Nothing changed: two passes, no mutating call.
	time.Sleep(repairPeriod)
	before := len(fake.MutatingCalls())
	time.Sleep(2*repairPeriod + time.Second)
	if got := fake.MutatingCalls(); len(got) != before {
		t.Errorf("passes with nothing changed made mutating calls: %v", got[before:])
	}

	// A listener deleted behind our back.
	lb := lbOf("default/drift-aws")
	out, err := elbClient().DescribeListeners(ctx, &elbv2.DescribeListenersInput{LoadBalancerArn: awssdk.String(lb.ARN)})
	if err != nil || len(out.Listeners) != 1 {
		t.Fatalf("listeners %v, %v", out, err)
	}
	if _, err := elbClient().DeleteListener(ctx, &elbv2.DeleteListenerInput{ListenerArn: out.Listeners[0].ListenerArn}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, settle, "the listener restored", func(context.Context) (bool, string, error) {
		lb := lbOf("default/drift-aws")
		return lb != nil && len(lb.Listeners) == 1, fmt.Sprintf("%+v", lb), nil
	})
	framework.Eventually(t, settle, "the LoadBalancerDriftRepaired event on drift-aws", framework.EventWith(cp.Client, "Service", ns, "drift-aws", "LoadBalancerDriftRepaired", "listener"))

	// The bare-metal address edited away.
	s := service(ctx, t, cp, "drift-metal")
	ip := framework.IngressIPs(s)[0]
	s.Status.LoadBalancer = corev1.LoadBalancerStatus{}
	if _, err := cp.Client.CoreV1().Services(ns).UpdateStatus(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, settle, "drift-metal's address restored", framework.ServiceMatches(cp.Client, ns, "drift-metal", ingressIs(ip)))
	framework.Eventually(t, settle, "the LoadBalancerDriftRepaired event on drift-metal", framework.EventWith(cp.Client, "Service", ns, "drift-metal", "LoadBalancerDriftRepaired", "status address restored"))
}

// TestRestartMidCreation: the CCM stops while a classed Service's NLB is
// half made (created, but its listener call failed); the restarted CCM
// finishes it, and exactly one NLB exists.
func TestRestartMidCreation(t *testing.T) {
	cp := env(t)
	ctx := ctxFor(t)
	fake.FailNext("CreateListener", "AccessDenied")
	if _, err := framework.CreateService(ctx, cp.Client, framework.NewLoadBalancerService(ns, "midway", framework.WithLoadBalancerClass(awsClass))); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cp.Client.CoreV1().Services(ns).Delete(context.Background(), "midway", metav1.DeleteOptions{})
	})
	framework.Eventually(t, settle, "a failed sync of midway", framework.EventSeen(cp.Client, "Service", ns, "midway", corev1.EventTypeWarning, "SyncLoadBalancerFailed"))
	if lb := lbOf("default/midway"); lb == nil {
		t.Fatal("no half-made NLB to restart with")
	}
	if err := ccm.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, settle, "midway shows its NLB", framework.ServiceMatches(cp.Client, ns, "midway", withFinalizer(ingressIsNLBOf("default/midway"))))
	n := 0
	for _, lb := range fake.LoadBalancers() {
		if lb.Tags["kubernetes.io/service-name"] == "default/midway" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d NLBs for midway, want 1", n)
	}
	if s := service(ctx, t, cp, "midway"); s.Annotations[string(annotation.LoadBalancerServedBy)] != awsBackend {
		t.Errorf("served-by %q, want %s", s.Annotations[string(annotation.LoadBalancerServedBy)], awsBackend)
	}
}
