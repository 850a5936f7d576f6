package aws

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/multicloud-ccm/multicloud-ccm/internal/awsfake"
	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// annotated drives one Service through the upstream service controller
// against the backend and the fake, step by step: each step sets the
// Service's annotations (all of them) and waits for the fake to show what
// the step expects.
type annotated struct {
	t      *testing.T
	e      *env
	client *fake.Clientset
	svc    *corev1.Service
	// lbARN is the NLB the first step made.
	lbARN string
}

// startAnnotated creates the Service with annotations and waits until its
// status shows the NLB and check passes.
func startAnnotated(t *testing.T, svc *corev1.Service, check func(*env) error) *annotated {
	t.Helper()
	e := newEnv(t)
	a := &annotated{t: t, e: e, client: testutil.NewClientset(), svc: svc}
	runServiceController(t, e.cloud, a.client)
	if _, err := a.client.CoreV1().Services(svc.Namespace).Create(context.Background(), svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the NLB is created as the annotations ask", func() error {
		s, err := a.client.CoreV1().Services(svc.Namespace).Get(context.Background(), svc.Name, metav1.GetOptions{})
		if err != nil || len(s.Status.LoadBalancer.Ingress) == 0 {
			return fmt.Errorf("no ingress yet (%w)", err)
		}
		return check(e)
	})
	a.lbARN = e.onlyLB(t).ARN
	return a
}

// change sets the Service's annotations (ours are replaced, the router's
// kept) and waits for check; the NLB must stay the same one, and the
// change must have made only the mutating calls listed in calls (by
// operation, any order and count; nil: any but create/delete of the NLB).
func (a *annotated) change(what string, annotations map[annotation.Name]string, check func(*env) error, calls ...string) {
	a.t.Helper()
	a.e.fake.ResetCalls()
	a.update(annotations)
	eventually(a.t, what, func() error { return check(a.e) })
	if got := a.e.onlyLB(a.t).ARN; got != a.lbARN {
		a.t.Fatalf("%s replaced the NLB: %s -> %s", what, a.lbARN, got)
	}
	for _, op := range a.e.fake.MutatingCalls() {
		if op == "CreateLoadBalancer" || op == "DeleteLoadBalancer" || (calls != nil && !contains(calls, op)) {
			a.t.Errorf("%s made mutating call %s; want only %v", what, op, calls)
		}
	}
}

// refused sets bad annotations and waits for the Warning event whose
// message contains every string in want; AWS must see no mutating call.
func (a *annotated) refused(what string, annotations map[annotation.Name]string, want ...string) {
	a.t.Helper()
	a.e.fake.ResetCalls()
	a.update(annotations)
	eventually(a.t, what+" is a Warning event", func() error {
		evs, err := a.client.CoreV1().Events("").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, ev := range evs.Items {
			if ev.Type == corev1.EventTypeWarning && containsAll(ev.Message, want) {
				return nil
			}
		}
		return fmt.Errorf("no Warning event containing %q among %d events", want, len(evs.Items))
	})
	time.Sleep(200 * time.Millisecond)
	a.e.assertNoMutation(a.t, what)
}

// resyncChangesNothing runs Update on the Service as it is now: nothing
// changed, so no mutating call.
func (a *annotated) resyncChangesNothing() {
	a.t.Helper()
	s, err := a.client.CoreV1().Services(a.svc.Namespace).Get(context.Background(), a.svc.Name, metav1.GetOptions{})
	if err != nil {
		a.t.Fatal(err)
	}
	list, err := a.client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		a.t.Fatal(err)
	}
	var nodes []*corev1.Node
	for i := range list.Items {
		nodes = append(nodes, &list.Items[i])
	}
	a.e.fake.ResetCalls()
	if err := a.e.cloud.lb.UpdateLoadBalancer(context.Background(), testCluster, s, nodes); err != nil {
		a.t.Fatal(err)
	}
	a.e.assertNoMutation(a.t, "a resync with nothing changed")
}

func (a *annotated) update(annotations map[annotation.Name]string) {
	a.t.Helper()
	ctx := context.Background()
	s, err := a.client.CoreV1().Services(a.svc.Namespace).Get(ctx, a.svc.Name, metav1.GetOptions{})
	if err != nil {
		a.t.Fatal(err)
	}
	s.Annotations = map[string]string{}
	withAnnotations(annotations)(s)
	if _, err := a.client.CoreV1().Services(a.svc.Namespace).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		a.t.Fatal(err)
	}
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// onlyTG returns the single target group, or an error.
func onlyTG(e *env) (awsfake.TargetGroupView, error) {
	tgs := e.fake.TargetGroups()
	if len(tgs) != 1 {
		return awsfake.TargetGroupView{}, fmt.Errorf("%d target groups, want 1", len(tgs))
	}
	return tgs[0], nil
}

// healthCheckIs checks the target group's health check, rendered as
// "PROTOCOL port path interval/timeout healthy/unhealthy".
func healthCheckIs(want string) func(*env) error {
	return func(e *env) error {
		tg, err := onlyTG(e)
		if err != nil {
			return err
		}
		got := fmt.Sprintf("%s %s %s %d/%d %d/%d", tg.HealthCheckProtocol, tg.HealthCheckPort, tg.HealthCheckPath,
			tg.HealthCheckInterval, tg.HealthCheckTimeout, tg.HealthyThreshold, tg.UnhealthyThreshold)
		if got != want {
			return fmt.Errorf("health check %q, want %q", got, want)
		}
		return nil
	}
}

func TestHealthCheckAnnotations(t *testing.T) {
	a := startAnnotated(t, newService("web",
		withAnnotation(AnnotationHealthCheckProtocol, "http"),
		withAnnotation(AnnotationHealthCheckPath, "/ready"),
		withAnnotation(AnnotationHealthCheckPort, "8081"),
		withAnnotation(AnnotationHealthCheckInterval, "10"),
		withAnnotation(AnnotationHealthCheckTimeout, "4"),
		withAnnotation(AnnotationHealthyThreshold, "3"),
		withAnnotation(AnnotationUnhealthyThreshold, "4"),
	), healthCheckIs("HTTP 8081 /ready 10/4 3/4"))

	changed := map[annotation.Name]string{
		AnnotationHealthCheckProtocol: "HTTPS",
		AnnotationHealthCheckPath:     "/live",
		AnnotationHealthCheckPort:     "traffic-port",
		AnnotationHealthCheckInterval: "20",
		AnnotationHealthCheckTimeout:  "5",
		AnnotationHealthyThreshold:    "2",
		AnnotationUnhealthyThreshold:  "10",
	}
	a.change("every health-check annotation changed", changed, healthCheckIs("HTTPS traffic-port /live 20/5 2/10"), "ModifyTargetGroup")
	if n := a.e.fake.Calls("ModifyTargetGroup"); n != 1 {
		t.Errorf("ModifyTargetGroup calls = %d, want 1 (one call for the whole change)", n)
	}
	a.change("protocol tcp drops the path", map[annotation.Name]string{AnnotationHealthCheckProtocol: "tcp", AnnotationHealthCheckInterval: "300"},
		healthCheckIs("TCP traffic-port  300/10 3/3"), "ModifyTargetGroup")

	for _, bad := range []struct {
		name string
		ann  map[annotation.Name]string
		want []string
	}{
		{"interval below 5", map[annotation.Name]string{AnnotationHealthCheckInterval: "4"}, []string{string(AnnotationHealthCheckInterval), "from 5 to 300"}},
		{"interval not a number", map[annotation.Name]string{AnnotationHealthCheckInterval: "10s"}, []string{string(AnnotationHealthCheckInterval), "from 5 to 300"}},
		{"timeout above 120", map[annotation.Name]string{AnnotationHealthCheckTimeout: "121"}, []string{string(AnnotationHealthCheckTimeout), "from 2 to 120"}},
		{"healthy threshold 1", map[annotation.Name]string{AnnotationHealthyThreshold: "1"}, []string{string(AnnotationHealthyThreshold), "from 2 to 10"}},
		{"unhealthy threshold 11", map[annotation.Name]string{AnnotationUnhealthyThreshold: "11"}, []string{string(AnnotationUnhealthyThreshold), "from 2 to 10"}},
		{"protocol udp", map[annotation.Name]string{AnnotationHealthCheckProtocol: "udp"}, []string{string(AnnotationHealthCheckProtocol), "TCP, HTTP, HTTPS"}},
		{"port 0", map[annotation.Name]string{AnnotationHealthCheckPort: "0"}, []string{string(AnnotationHealthCheckPort), "traffic-port or a port number"}},
		{"path without slash", map[annotation.Name]string{AnnotationHealthCheckProtocol: "HTTP", AnnotationHealthCheckPath: "ready"}, []string{string(AnnotationHealthCheckPath), "starting with /"}},
		{"two bad values, both named", map[annotation.Name]string{AnnotationHealthCheckInterval: "1", AnnotationHealthyThreshold: "99"},
			[]string{string(AnnotationHealthCheckInterval), string(AnnotationHealthyThreshold)}},
	} {
		a.refused(bad.name, bad.ann, bad.want...)
		if err := healthCheckIs("TCP traffic-port  300/10 3/3")(a.e); err != nil {
			t.Errorf("%s changed the health check: %v", bad.name, err)
		}
	}

	a.change("annotations removed: the defaults (upstream's) again", nil, healthCheckIs("TCP traffic-port  30/10 3/3"), "ModifyTargetGroup")
	a.resyncChangesNothing()
}

// TestHealthCheckLocalTrafficDefaults: with externalTrafficPolicy Local the
// default check is upstream's: HTTP on the healthCheckNodePort at /healthz
// every 10 s, 2 checks either way (AWS's HTTP timeout, 6 s); the
// annotations override parts of it.
func TestHealthCheckLocalTrafficDefaults(t *testing.T) {
	a := startAnnotated(t, newService("web", testutil.WithLocalTraffic(32000)), healthCheckIs("HTTP 32000 /healthz 10/6 2/2"))
	a.change("interval and thresholds on the Local default", map[annotation.Name]string{AnnotationHealthCheckInterval: "30", AnnotationHealthyThreshold: "5"},
		healthCheckIs("HTTP 32000 /healthz 30/6 5/2"), "ModifyTargetGroup")
}

// attributesAre checks some of the target group's attributes.
func attributesAre(want map[string]string) func(*env) error {
	return func(e *env) error {
		tg, err := onlyTG(e)
		if err != nil {
			return err
		}
		for k, v := range want {
			if tg.Attributes[k] != v {
				return fmt.Errorf("attribute %s=%q, want %q (all: %v)", k, tg.Attributes[k], v, tg.Attributes)
			}
		}
		return nil
	}
}

func TestTargetGroupAttributeAnnotations(t *testing.T) {
	a := startAnnotated(t, newService("web",
		withAnnotation(AnnotationTargetGroupAttributes, "preserve_client_ip.enabled=true, deregistration_delay.timeout_seconds=30"),
	), attributesAre(map[string]string{attrPreserveClientIP: "true", "deregistration_delay.timeout_seconds": "30", attrProxyProtocolV2: "false"}))

	a.change("proxy protocol on, delay changed, stickiness on",
		map[annotation.Name]string{AnnotationTargetGroupAttributes: "preserve_client_ip.enabled=true,deregistration_delay.timeout_seconds=0,stickiness.enabled=true", AnnotationProxyProtocol: "*"},
		attributesAre(map[string]string{attrProxyProtocolV2: "true", "deregistration_delay.timeout_seconds": "0", "stickiness.enabled": "true"}),
		"ModifyTargetGroupAttributes")
	if n := a.e.fake.Calls("ModifyTargetGroupAttributes"); n != 1 {
		t.Errorf("ModifyTargetGroupAttributes calls = %d, want 1", n)
	}

	for _, bad := range []struct {
		name string
		ann  map[annotation.Name]string
		want []string
	}{
		{"unknown attribute", map[annotation.Name]string{AnnotationTargetGroupAttributes: "slow_start.duration_seconds=30"}, []string{string(AnnotationTargetGroupAttributes), "slow_start.duration_seconds", "preserve_client_ip.enabled"}},
		{"not a bool", map[annotation.Name]string{AnnotationTargetGroupAttributes: "proxy_protocol_v2.enabled=yes"}, []string{string(AnnotationTargetGroupAttributes), "one of true, false"}},
		{"delay out of range", map[annotation.Name]string{AnnotationTargetGroupAttributes: "deregistration_delay.timeout_seconds=3601"}, []string{"from 0 to 3600"}},
		{"not key=value", map[annotation.Name]string{AnnotationTargetGroupAttributes: "stickiness.enabled"}, []string{"not key=value"}},
		{"proxy protocol other than *", map[annotation.Name]string{AnnotationProxyProtocol: "true"}, []string{string(AnnotationProxyProtocol), `must be "*"`}},
		{"proxy protocol contradicted", map[annotation.Name]string{AnnotationProxyProtocol: "*", AnnotationTargetGroupAttributes: "proxy_protocol_v2.enabled=false"}, []string{"contradicts"}},
	} {
		a.refused(bad.name, bad.ann, bad.want...)
		if err := attributesAre(map[string]string{attrProxyProtocolV2: "true", "stickiness.enabled": "true"})(a.e); err != nil {
			t.Errorf("%s changed the attributes: %v", bad.name, err)
		}
	}

	a.change("annotations removed: AWS's defaults again (IP targets: no client IP preservation)", nil,
		attributesAre(map[string]string{attrPreserveClientIP: "false", attrProxyProtocolV2: "false", "deregistration_delay.timeout_seconds": "300", "stickiness.enabled": "false"}),
		"ModifyTargetGroupAttributes")
	a.resyncChangesNothing()
}

// TestClientIPPreservationOffRefusedForUDP: AWS cannot turn client IP
// preservation off for UDP; the backend says so before calling it.
func TestClientIPPreservationOffRefusedForUDP(t *testing.T) {
	e := newEnv(t)
	svc := newService("dns", func(s *corev1.Service) { s.Spec.Ports[0].Protocol = corev1.ProtocolUDP },
		withAnnotation(AnnotationTargetGroupAttributes, "preserve_client_ip.enabled=false"))
	lb, _ := e.cloud.LoadBalancer()
	_, err := lb.EnsureLoadBalancer(context.Background(), testCluster, svc, nil)
	if err == nil || !strings.Contains(err.Error(), "cannot be turned off for UDP") {
		t.Fatalf("err = %v, want the UDP refusal", err)
	}
	e.assertNoMutation(t, "a refused Service")
}

// TestTypeExternalIsImplementedElsewhere: aws-load-balancer-type external
// or nlb-ip belongs to the AWS Load Balancer Controller. The backend makes
// no AWS call at all for such a Service, and setting it on a Service whose
// NLB we made leaves that NLB alone (as upstream does).
func TestTypeExternalIsImplementedElsewhere(t *testing.T) {
	for _, typ := range []string{typeExternal, typeNLBIP} {
		t.Run(typ, func(t *testing.T) {
			e := newEnv(t)
			client := testutil.NewClientset()
			runServiceController(t, e.cloud, client)
			ctx := context.Background()
			if _, err := client.CoreV1().Services("default").Create(ctx, newService("lbc", withAnnotation(AnnotationType, typ)), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			a := startAnnotatedOn(t, e, client, newService("web", withAnnotation(AnnotationType, typeNLB)))
			if n := len(e.fake.LoadBalancers()); n != 1 {
				t.Fatalf("%d load balancers, want only web's", n)
			}
			e.fake.ResetCalls()
			a.update(map[annotation.Name]string{AnnotationType: typ})
			time.Sleep(time.Second)
			if n := e.fake.TotalCalls(); n != 0 {
				t.Errorf("%d AWS calls after the type became %s, want none: %v", n, typ, e.fake.CallCounts())
			}
			deleteService(t, client, "web")
			deleteService(t, client, "lbc")
			eventually(t, "both Services released", func() error {
				for _, name := range []string{"web", "lbc"} {
					if s, err := client.CoreV1().Services("default").Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
						return fmt.Errorf("%s is still there (finalizers %v, err %w)", name, s.Finalizers, err)
					}
				}
				return nil
			})
			if n := e.fake.TotalCalls(); n != 0 || len(e.fake.LoadBalancers()) != 1 {
				t.Errorf("%d AWS calls, %d load balancers after deleting; want none and web's NLB left alone", n, len(e.fake.LoadBalancers()))
			}
		})
	}
}

// startAnnotatedOn is startAnnotated on a running controller.
func startAnnotatedOn(t *testing.T, e *env, client *fake.Clientset, svc *corev1.Service) *annotated {
	t.Helper()
	a := &annotated{t: t, e: e, client: client, svc: svc}
	if _, err := client.CoreV1().Services(svc.Namespace).Create(context.Background(), svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the Service gets its NLB", func() error {
		s, err := client.CoreV1().Services(svc.Namespace).Get(context.Background(), svc.Name, metav1.GetOptions{})
		if err != nil || len(s.Status.LoadBalancer.Ingress) == 0 {
			return fmt.Errorf("no ingress yet (%w)", err)
		}
		return nil
	})
	return a
}

func TestTypeOtherThanNLBIsRefused(t *testing.T) {
	a := startAnnotated(t, newService("web"), func(*env) error { return nil })
	a.refused("type clb", map[annotation.Name]string{AnnotationType: "clb"}, string(AnnotationType), "must be nlb")
}

// lbAttributesAre checks some of the NLB's attributes.
func lbAttributesAre(want map[string]string) func(*env) error {
	return func(e *env) error {
		lbs := e.fake.LoadBalancers()
		if len(lbs) != 1 {
			return fmt.Errorf("%d load balancers", len(lbs))
		}
		for k, v := range want {
			if lbs[0].Attributes[k] != v {
				return fmt.Errorf("attribute %s=%q, want %q (all: %v)", k, lbs[0].Attributes[k], v, lbs[0].Attributes)
			}
		}
		return nil
	}
}

func TestLoadBalancerAttributeAnnotations(t *testing.T) {
	a := startAnnotated(t, newService("web",
		withAnnotation(AnnotationCrossZone, "true"),
		withAnnotation(AnnotationAttributes, "deletion_protection.enabled=true"),
	), lbAttributesAre(map[string]string{attrCrossZone: "true", attrDeletionProtection: "true", attrAccessLogs: "false"}))

	logs := map[annotation.Name]string{AnnotationAccessLogEnabled: "true", AnnotationAccessLogBucket: "logs", AnnotationAccessLogPrefix: "web",
		AnnotationAttributes: "deletion_protection.enabled=true,load_balancing.cross_zone.enabled=false,dns_record.client_routing_policy=availability_zone_affinity"}
	a.change("access logs on, cross-zone off through -attributes", logs,
		lbAttributesAre(map[string]string{attrCrossZone: "false", attrAccessLogs: "true", attrAccessLogsBucket: "logs", attrAccessLogsPrefix: "web", attrRoutingPolicy: "availability_zone_affinity"}),
		"ModifyLoadBalancerAttributes")
	if n := a.e.fake.Calls("ModifyLoadBalancerAttributes"); n != 1 {
		t.Errorf("ModifyLoadBalancerAttributes calls = %d, want 1", n)
	}

	for _, bad := range []struct {
		name string
		ann  map[annotation.Name]string
		want []string
	}{
		{"cross-zone not a bool", map[annotation.Name]string{AnnotationCrossZone: "yes"}, []string{string(AnnotationCrossZone), "one of true, false"}},
		{"logs without a bucket", map[annotation.Name]string{AnnotationAccessLogEnabled: "true"}, []string{"access logs need a bucket"}},
		{"unknown attribute", map[annotation.Name]string{AnnotationAttributes: "idle_timeout.timeout_seconds=60"}, []string{string(AnnotationAttributes), "idle_timeout.timeout_seconds", "deletion_protection.enabled"}},
		{"the two names disagree", map[annotation.Name]string{AnnotationCrossZone: "true", AnnotationAttributes: "load_balancing.cross_zone.enabled=false"}, []string{"contradicts"}},
	} {
		a.refused(bad.name, bad.ann, bad.want...)
		if err := lbAttributesAre(map[string]string{attrAccessLogs: "true", attrDeletionProtection: "true"})(a.e); err != nil {
			t.Errorf("%s changed the attributes: %v", bad.name, err)
		}
	}

	a.change("every attribute but deletion protection removed: AWS's defaults again", map[annotation.Name]string{AnnotationAttributes: "deletion_protection.enabled=true"},
		lbAttributesAre(map[string]string{attrCrossZone: "false", attrAccessLogs: "false", attrRoutingPolicy: "any_availability_zone", attrDeletionProtection: "true"}),
		"ModifyLoadBalancerAttributes")
	a.resyncChangesNothing()

	// Deletion protection holds the NLB while set; removing it lets the
	// delete through.
	deleteService(t, a.client, "web")
	time.Sleep(time.Second)
	if n := len(a.e.fake.LoadBalancers()); n != 1 {
		t.Fatalf("%d load balancers; deletion protection should keep the NLB", n)
	}
	a.update(nil)
	eventually(t, "protection off, the delete goes through", func() error {
		if n := a.e.fake.ResourceCount(); n != 0 {
			return fmt.Errorf("%d resources left", n)
		}
		return nil
	})
}

// TestAdditionalTagsAndTargetNodeLabels: additional tags go on every
// resource created and onto the NLB when changed; target-node-labels
// chooses the targets, in place.
func TestAdditionalTagsAndTargetNodeLabels(t *testing.T) {
	tagged := func(want map[string]string) func(*env) error {
		return func(e *env) error {
			lb := e.onlyLB(t)
			tg, err := onlyTG(e)
			if err != nil {
				return err
			}
			sgs := e.fake.SecurityGroups()
			listener, err := listenerTags(e, lb.ARN)
			if err != nil {
				return err
			}
			for k, v := range want {
				if lb.Tags[k] != v || tg.Tags[k] != v || len(sgs) != 1 || sgs[0].Tags[k] != v || listener[k] != v {
					return fmt.Errorf("tag %s=%q: NLB %v, target group %v, listener %v, security groups %+v", k, v, lb.Tags, tg.Tags, listener, sgs)
				}
			}
			return nil
		}
	}
	base := map[annotation.Name]string{AnnotationAdditionalTags: "team=web,cost-center=42,bare", AnnotationTargetType: targetInstance}
	a := startAnnotated(t, newService("web", withAnnotations(base)),
		tagged(map[string]string{"team": "web", "cost-center": "42", "bare": ""}))

	nodes := a.e.awsNodes(1, 3)
	nodes[0].Labels = map[string]string{"pool": "edge"}
	nodes[1].Labels = map[string]string{"pool": "batch"}
	createNodes(t, a.client, nodes...)
	targets := func(want ...string) func(*env) error {
		return func(e *env) error {
			tg, err := onlyTG(e)
			if err != nil {
				return err
			}
			if got := strings.Join(tg.Targets, ","); got != strings.Join(want, ",") {
				return fmt.Errorf("targets %s, want %s", got, strings.Join(want, ","))
			}
			return nil
		}
	}
	everyNode := targets(instanceID(1)+":30080", instanceID(2)+":30080", instanceID(3)+":30080")
	eventually(t, "every node a target", func() error { return everyNode(a.e) })

	labelled := maps.Clone(base)
	labelled[AnnotationTargetNodeLabels] = "pool=edge"
	a.change("only pool=edge nodes", labelled, targets(instanceID(1)+":30080"), "DeregisterTargets")
	labelled[AnnotationTargetNodeLabels] = "pool"
	a.change("any pool", labelled, targets(instanceID(1)+":30080", instanceID(2)+":30080"), "RegisterTargets")

	retagged := maps.Clone(labelled)
	retagged[AnnotationAdditionalTags] = "team=platform,cost-center=42,bare,owner=sre"
	// AWS refuses the first AddTags: the retry still tags everything (the
	// NLB, by which a change is seen, is tagged last).
	a.e.fake.FailNext("AddTags", "AccessDenied")
	a.change("a tag changed, one added: on everything made for the Service", retagged,
		tagged(map[string]string{"team": "platform", "cost-center": "42", "bare": "", "owner": "sre"}), "AddTags", "CreateTags")
	if n := a.e.fake.Calls("AddTags"); n != 3 {
		t.Errorf("AddTags calls = %d, want 3 (the refused one; the listener and target group; the NLB)", n)
	}
	a.resyncChangesNothing()

	bad := maps.Clone(retagged)
	bad[AnnotationAdditionalTags] = "kubernetes.io/service-name=other/svc"
	a.refused("the backend's own tag", bad, string(AnnotationAdditionalTags), "the backend's own")
	badLabels := maps.Clone(retagged)
	badLabels[AnnotationTargetNodeLabels] = "pool=edge,=batch"
	a.refused("a label without a key", badLabels, string(AnnotationTargetNodeLabels), `entry "=batch" has no key`)
	a.change("good annotations again", retagged, targets(instanceID(1)+":30080", instanceID(2)+":30080"), "none")
	delete(retagged, AnnotationTargetNodeLabels)
	a.change("labels removed: every node again", retagged, targets(instanceID(1)+":30080", instanceID(2)+":30080", instanceID(3)+":30080"), "RegisterTargets")
}

// listenerTags returns the tags of the only listener of the NLB at lbARN,
// read through the ELBv2 API.
func listenerTags(e *env, lbARN string) (map[string]string, error) {
	ctx := context.Background()
	ls, err := e.cloud.lb.elb.DescribeListeners(ctx, &elbv2.DescribeListenersInput{LoadBalancerArn: awssdk.String(lbARN)})
	if err != nil || len(ls.Listeners) != 1 {
		return nil, fmt.Errorf("DescribeListeners: %v (%w)", ls, err)
	}
	arn := awssdk.ToString(ls.Listeners[0].ListenerArn)
	tags, err := e.cloud.lb.elb.DescribeTags(ctx, &elbv2.DescribeTagsInput{ResourceArns: []string{arn}})
	if err != nil {
		return nil, fmt.Errorf("DescribeTags %s: %w", arn, err)
	}
	return tagMaps(tags)[arn], nil
}

// TestEveryBadAnnotationInOneError: bad values of annotations read in
// different places (scheme, target type, health check, attributes, tags)
// are all named in one InvalidLoadBalancerAnnotation error, and nothing is
// changed in AWS.
func TestEveryBadAnnotationInOneError(t *testing.T) {
	e := newEnv(t)
	bad := map[annotation.Name]string{
		AnnotationScheme:                "public",
		AnnotationTargetType:            "lambda",
		AnnotationHealthCheckInterval:   "1",
		AnnotationAttributes:            "deletion_protection.enabled=maybe",
		AnnotationAdditionalTags:        "kubernetes.io/service-name=x",
		AnnotationTargetGroupAttributes: "nonsense",
	}
	lb, _ := e.cloud.LoadBalancer()
	_, err := lb.EnsureLoadBalancer(context.Background(), testCluster, newService("web", withAnnotations(bad)), e.awsNodes(1, 1))
	ue, ok := backends.AsUserError(err)
	if !ok || ue.Reason != annotation.ReasonInvalid {
		t.Fatalf("err = %v, want a %s user error", err, annotation.ReasonInvalid)
	}
	for n := range bad {
		if !strings.Contains(err.Error(), string(n)) {
			t.Errorf("the error does not name %s: %v", n, err)
		}
	}
	e.assertNoMutation(t, "a Service with bad annotations")
}

// userSG creates a security group of the user's in the VPC, allowing
// 443 from 10.0.0.0/8, and returns its ID.
func userSG(t *testing.T, e *env, name string) string {
	t.Helper()
	ctx := context.Background()
	out, err := e.cloud.lb.ec2.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{GroupName: awssdk.String(name), Description: awssdk.String("the user's"), VpcId: awssdk.String(testVPC)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.cloud.lb.ec2.AuthorizeSecurityGroupIngress(ctx, &ec2.AuthorizeSecurityGroupIngressInput{GroupId: out.GroupId, IpPermissions: []ec2types.IpPermission{
		{IpProtocol: awssdk.String("tcp"), FromPort: awssdk.Int32(443), ToPort: awssdk.Int32(443), IpRanges: []ec2types.IpRange{{CidrIp: awssdk.String("10.0.0.0/8")}}}}}); err != nil {
		t.Fatal(err)
	}
	return awssdk.ToString(out.GroupId)
}

// nlbGroups checks the NLB's security groups: want lists the user's IDs,
// with "ours" for the backend's own group.
func nlbGroups(want ...string) func(*env) error {
	return func(e *env) error {
		lbs := e.fake.LoadBalancers()
		if len(lbs) != 1 {
			return fmt.Errorf("%d load balancers", len(lbs))
		}
		var got []string
		for _, id := range lbs[0].SecurityGroups {
			if sgs := e.fake.SecurityGroups(); slices.ContainsFunc(sgs, func(sg awsfake.SecurityGroupView) bool { return sg.ID == id && sg.Tags[tagService] != "" }) {
				id = "ours"
			}
			got = append(got, id)
		}
		slices.Sort(got)
		want = slices.Sorted(slices.Values(want))
		if !slices.Equal(got, want) {
			return fmt.Errorf("NLB security groups %v, want %v", got, want)
		}
		return nil
	}
}

// TestSecurityGroupAnnotations: the Service's own security groups replace
// the backend's (which is then not made, or deleted), extra ones go beside;
// every change is one SetSecurityGroups on the same NLB; the user's groups
// are never changed or deleted; unknown groups are refused before any
// change.
func TestSecurityGroupAnnotations(t *testing.T) {
	e := newEnv(t)
	byo1, byo2, extra := userSG(t, e, "byo-1"), userSG(t, e, "byo-2"), userSG(t, e, "extra")
	e.fake.ResetCalls()
	client := testutil.NewClientset()
	runServiceController(t, e.cloud, client)
	a := startAnnotatedOn(t, e, client, newService("web", withAnnotation(AnnotationSecurityGroups, byo1)))
	a.lbARN = e.onlyLB(t).ARN
	if err := nlbGroups(byo1)(e); err != nil {
		t.Fatal(err)
	}
	if n := e.fake.Calls("CreateSecurityGroup"); n != 0 {
		t.Errorf("CreateSecurityGroup calls = %d with the Service's own group, want 0", n)
	}
	a.change("extra group added", map[annotation.Name]string{AnnotationSecurityGroups: byo1, AnnotationExtraSecurityGroups: extra},
		nlbGroups(byo1, extra), "SetSecurityGroups")
	a.resyncChangesNothing()
	a.change("own groups removed: the backend's group again, beside the extra one", map[annotation.Name]string{AnnotationExtraSecurityGroups: extra},
		nlbGroups("ours", extra), "CreateSecurityGroup", "AuthorizeSecurityGroupIngress", "SetSecurityGroups")
	a.change("another own group: the backend's is deleted", map[annotation.Name]string{AnnotationSecurityGroups: byo2},
		func(e *env) error {
			if err := nlbGroups(byo2)(e); err != nil {
				return err
			}
			if n := e.fake.SecurityGroupCount(); n != 3 {
				return fmt.Errorf("%d security groups, want the user's 3", n)
			}
			return nil
		}, "SetSecurityGroups", "DeleteSecurityGroup")

	for _, bad := range []struct {
		name string
		ann  map[annotation.Name]string
		want []string
	}{
		{"unknown group", map[annotation.Name]string{AnnotationSecurityGroups: "sg-0123456789abcdef0"}, []string{string(AnnotationSecurityGroups), "sg-0123456789abcdef0 does not exist"}},
		{"not an ID", map[annotation.Name]string{AnnotationExtraSecurityGroups: "default"}, []string{string(AnnotationExtraSecurityGroups), "like sg-0123456789abcdef0"}},
		{"listed twice", map[annotation.Name]string{AnnotationSecurityGroups: byo2, AnnotationExtraSecurityGroups: byo2}, []string{"list it once"}},
		{"manage not a bool", map[annotation.Name]string{AnnotationSecurityGroups: byo2, AnnotationManageBackendSGRules: "yes"}, []string{string(AnnotationManageBackendSGRules)}},
	} {
		a.refused(bad.name, bad.ann, bad.want...)
		if err := nlbGroups(byo2)(e); err != nil {
			t.Errorf("%s changed the NLB: %v", bad.name, err)
		}
	}
	a.change("good annotations again", map[annotation.Name]string{AnnotationSecurityGroups: byo2}, nlbGroups(byo2), "none")

	deleteService(t, client, "web")
	eventually(t, "the NLB deleted, the user's groups left as they were", func() error {
		if n := len(e.fake.LoadBalancers()); n != 0 {
			return fmt.Errorf("%d load balancers", n)
		}
		return nil
	})
	for _, id := range []string{byo1, byo2, extra} {
		if got := e.fake.SecurityGroupIngress(id); strings.Join(got, ",") != "tcp:443-443:10.0.0.0/8" {
			t.Errorf("the user's group %s has rules %v, want them unchanged", id, got)
		}
	}
	if n := e.fake.SecurityGroupCount(); n != 3 {
		t.Errorf("%d security groups left, want the user's 3", n)
	}
}

// TestManageBackendSecurityGroupRules: with instance targets, each
// instance's security group (its only one, else the one tagged as the
// cluster's) allows the NodePort from the backend's own group; turning
// the annotation off removes those rules and nothing else; with the
// Service's own groups the backend's group goes beside them only when the
// annotation asks for it; deleting the Service removes the rules and the
// backend's group and leaves the instances' groups as they were.
func TestManageBackendSecurityGroupRules(t *testing.T) {
	e := newEnv(t)
	single, tagged, other := userSG(t, e, "nodes-a"), userSG(t, e, "nodes-b"), userSG(t, e, "ssh")
	byo := userSG(t, e, "frontend")
	if _, err := e.cloud.lb.ec2.(dryRunEC2).EC2API.(*ec2.Client).CreateTags(context.Background(), &ec2.CreateTagsInput{Resources: []string{tagged},
		Tags: []ec2types.Tag{{Key: awssdk.String(tagClusterPrefix + testCluster), Value: awssdk.String("owned")}}}); err != nil {
		t.Fatal(err)
	}
	in1 := e.addInstance(1, func(in *awsfake.Instance) { in.SecurityGroups = []string{single} })
	in2 := e.addInstance(2, func(in *awsfake.Instance) { in.SecurityGroups = []string{other, tagged} })
	var nodes []*corev1.Node
	for _, in := range []awsfake.Instance{in1, in2} {
		nodes = append(nodes, newNode(in.PrivateDNSName, testutil.WithProviderID(providerID(in.Zone, in.ID)), testutil.WithInternalIP(in.PrivateIPs[0])))
	}
	client := testutil.NewClientset()
	runServiceController(t, e.cloud, client)
	base := map[annotation.Name]string{AnnotationTargetType: targetInstance}
	a := startAnnotatedOn(t, e, client, newService("web", withAnnotations(base)))
	a.lbARN = e.onlyLB(t).ARN
	// The nodes join once the Service is handled (see
	// TestServiceControllerCrashBeforeStatus for why).
	createNodes(t, client, nodes...)
	ours := func() string {
		for _, sg := range e.fake.SecurityGroups() {
			if sg.Tags[tagService] != "" {
				return sg.ID
			}
		}
		return "none"
	}
	rules := func(want map[string]string) func(*env) error {
		return func(e *env) error {
			for id, w := range want {
				w = strings.ReplaceAll(w, "OURS", ours())
				if got := strings.Join(e.fake.SecurityGroupIngress(id), ","); got != w {
					return fmt.Errorf("group %s: rules %s, want %s", id, got, w)
				}
			}
			return nil
		}
	}
	const user = "tcp:443-443:10.0.0.0/8"
	eventually(t, "the instances registered and their groups allowing the NodePort from the backend's group", func() error {
		// The node sync registers the instances and adds the rules in
		// either order: both must be done before a resync can change nothing.
		for _, tg := range e.fake.TargetGroups() {
			if len(tg.Targets) != len(nodes) {
				return fmt.Errorf("target group %s: targets %v, want the %d instances", tg.Name, tg.Targets, len(nodes))
			}
		}
		return rules(map[string]string{single: "tcp:30080-30080:OURS," + user, tagged: "tcp:30080-30080:OURS," + user, other: user})(e)
	})
	a.resyncChangesNothing()

	off := maps.Clone(base)
	off[AnnotationManageBackendSGRules] = "false"
	a.change("backend rules off", off, rules(map[string]string{single: user, tagged: user, other: user}), "RevokeSecurityGroupIngress")

	own := maps.Clone(base)
	own[AnnotationSecurityGroups] = byo
	own[AnnotationManageBackendSGRules] = "true"
	a.change("the Service's own group, backend rules on", own, func(e *env) error {
		if err := nlbGroups(byo, "ours")(e); err != nil {
			return err
		}
		if got := e.fake.SecurityGroupIngress(ours()); len(got) != 0 {
			return fmt.Errorf("the backend group beside the Service's own allows %v, want nothing", got)
		}
		return rules(map[string]string{single: "tcp:30080-30080:OURS," + user, tagged: "tcp:30080-30080:OURS," + user, byo: user})(e)
	}, "AuthorizeSecurityGroupIngress", "RevokeSecurityGroupIngress", "SetSecurityGroups")

	deleteService(t, client, "web")
	eventually(t, "everything of the Service's gone, the user's groups as they were", func() error {
		if n := e.fake.ResourceCount(); n != 4 {
			return fmt.Errorf("%d resources left, want the user's 4 security groups", n)
		}
		if n := e.fake.SecurityGroupCount(); n != 4 {
			return fmt.Errorf("%d security groups, want the user's 4", n)
		}
		return rules(map[string]string{single: user, tagged: user, other: user, byo: user})(e)
	})
}

// listenersAre checks the NLB's listeners ("PROTOCOL:port->group", TLS
// ones with " (certificate, policy)"), sorted, and that no other target
// group is left.
func listenersAre(want ...string) func(*env) error {
	return func(e *env) error {
		lbs := e.fake.LoadBalancers()
		if len(lbs) != 1 {
			return fmt.Errorf("%d load balancers", len(lbs))
		}
		if got := strings.Join(lbs[0].Listeners, ", "); got != strings.Join(want, ", ") {
			return fmt.Errorf("listeners %s, want %s", got, strings.Join(want, ", "))
		}
		if n := len(e.fake.TargetGroups()); n != len(want) {
			return fmt.Errorf("%d target groups, want one per listener", n)
		}
		return nil
	}
}

// TestTLSAnnotations: ssl-cert makes TLS listeners on the ports ssl-ports
// lists (every TCP port by default), with AWS's default security policy
// unless ssl-negotiation-policy names one; backend-protocol ssl makes TLS
// target groups. Every change is in place on the same NLB with the fewest
// calls; bad values are refused before any change; removing the
// annotations makes plain TCP listeners again.
func TestTLSAnnotations(t *testing.T) {
	const (
		cert1 = "arn:aws:acm:eu-west-1:123456789012:certificate/11111111-1111-1111-1111-111111111111"
		cert2 = "arn:aws:acm:eu-west-1:123456789012:certificate/22222222-2222-2222-2222-222222222222"
		tls13 = "ELBSecurityPolicy-TLS13-1-2-2021-06"
	)
	svc := newService("web", withPort("https", corev1.ProtocolTCP, 443, 30443),
		withAnnotations(map[annotation.Name]string{AnnotationSSLCert: cert1, AnnotationSSLPorts: "https"}))
	n := namesFor(testCluster, svc)
	tg := func(port int32, proto string) string { return n.targetGroup(port, proto, targetIP) }
	a := startAnnotatedWith(t, func(e *env) { e.fake.AddCertificate(cert1); e.fake.AddCertificate(cert2) }, svc,
		listenersAre("TCP:80->"+tg(80, "TCP"), "TLS:443->"+tg(443, "TCP")+" ("+cert1+", "+defaultSSLPolicy+")"))

	a.change("certificate and policy changed", map[annotation.Name]string{AnnotationSSLCert: cert2, AnnotationSSLPorts: "443", AnnotationSSLNegotiationPolicy: tls13},
		listenersAre("TCP:80->"+tg(80, "TCP"), "TLS:443->"+tg(443, "TCP")+" ("+cert2+", "+tls13+")"), "ModifyListener")
	if n := a.e.fake.Calls("ModifyListener"); n != 1 {
		t.Errorf("ModifyListener calls = %d, want 1", n)
	}
	a.resyncChangesNothing()
	reencrypt := map[annotation.Name]string{AnnotationSSLCert: cert2, AnnotationSSLNegotiationPolicy: tls13, AnnotationBackendProtocol: "ssl"}
	a.change("every port, re-encrypted to the targets", reencrypt,
		listenersAre("TLS:443->"+tg(443, "TLS")+" ("+cert2+", "+tls13+")", "TLS:80->"+tg(80, "TLS")+" ("+cert2+", "+tls13+")"),
		"CreateTargetGroup", "ModifyListener", "DeleteTargetGroup")

	for _, bad := range []struct {
		name string
		ann  map[annotation.Name]string
		want []string
	}{
		{"unknown policy", map[annotation.Name]string{AnnotationSSLCert: cert2, AnnotationSSLNegotiationPolicy: "ELBSecurityPolicy-Nonsense"}, []string{string(AnnotationSSLNegotiationPolicy), "no such security policy"}},
		{"not a certificate ARN", map[annotation.Name]string{AnnotationSSLCert: "my-cert"}, []string{string(AnnotationSSLCert), "aws acm list-certificates"}},
		{"a port the Service lacks", map[annotation.Name]string{AnnotationSSLCert: cert2, AnnotationSSLPorts: "8443"}, []string{string(AnnotationSSLPorts), "8443 is not a TCP port"}},
		{"backend protocol grpc", map[annotation.Name]string{AnnotationSSLCert: cert2, AnnotationBackendProtocol: "grpc"}, []string{string(AnnotationBackendProtocol), "tcp, ssl, http, https"}},
	} {
		a.refused(bad.name, bad.ann, bad.want...)
	}
	a.change("good annotations again", reencrypt, listenersAre("TLS:443->"+tg(443, "TLS")+" ("+cert2+", "+tls13+")", "TLS:80->"+tg(80, "TLS")+" ("+cert2+", "+tls13+")"), "none")
	a.change("annotations removed: plain TCP", nil, listenersAre("TCP:443->"+tg(443, "TCP"), "TCP:80->"+tg(80, "TCP")),
		"CreateTargetGroup", "ModifyListener", "DeleteTargetGroup")
	a.resyncChangesNothing()

	a.update(map[annotation.Name]string{AnnotationSSLCert: "arn:aws:acm:eu-west-1:123456789012:certificate/33333333-3333-3333-3333-333333333333"})
	eventually(t, "a certificate AWS does not have is a Warning naming the annotation", func() error {
		evs, err := a.client.CoreV1().Events("").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, ev := range evs.Items {
			if ev.Type == corev1.EventTypeWarning && strings.Contains(ev.Message, string(AnnotationSSLCert)) && strings.Contains(ev.Message, "CertificateNotFound") {
				return nil
			}
		}
		return fmt.Errorf("no such event among %d", len(evs.Items))
	})
}

// startAnnotatedWith is startAnnotated with a hook run on the fresh env
// before the Service is created.
func startAnnotatedWith(t *testing.T, prepare func(*env), svc *corev1.Service, check func(*env) error) *annotated {
	t.Helper()
	e := newEnv(t)
	prepare(e)
	client := testutil.NewClientset()
	runServiceController(t, e.cloud, client)
	a := startAnnotatedOn(t, e, client, svc)
	eventually(t, "the NLB is created as the annotations ask", func() error { return check(e) })
	a.lbARN = e.onlyLB(t).ARN
	return a
}

// addressesAre checks the NLB's fixed addresses ("subnet=allocation-or-IP")
// and IP address type.
func addressesAre(ipType string, want ...string) func(*env) error {
	return func(e *env) error {
		lbs := e.fake.LoadBalancers()
		if len(lbs) != 1 {
			return fmt.Errorf("%d load balancers", len(lbs))
		}
		if got := strings.Join(lbs[0].Addresses, ","); got != strings.Join(want, ",") || lbs[0].IPAddressType != ipType {
			return fmt.Errorf("addresses %s (%s), want %s (%s)", got, lbs[0].IPAddressType, strings.Join(want, ","), ipType)
		}
		return nil
	}
}

// TestAddressAnnotations: Elastic IPs fix a new internet-facing NLB's
// addresses; AWS cannot change them, so a change on the running NLB is a
// LoadBalancerAddressesKept warning and nothing is changed (as upstream);
// the IP address type changes in place; bad values change nothing.
func TestAddressAnnotations(t *testing.T) {
	eips := []string{"eipalloc-00000000000000001", "eipalloc-00000000000000002", "eipalloc-00000000000000003", "eipalloc-00000000000000004"}
	prepare := func(e *env) {
		for _, id := range eips {
			e.fake.AddAddress(id)
		}
		for i, z := range []string{"a", "b"} {
			e.fake.AddSubnet(awsfake.Subnet{ID: "subnet-0" + z, VPCID: testVPC, Zone: testRegion + z, ZoneID: fmt.Sprintf("euw1-az%d", i+1),
				CIDR: fmt.Sprintf("10.0.%d.0/24", i), IPv6CIDR: fmt.Sprintf("2001:db8:0:%d::/64", i), Tags: map[string]string{tagRoleELB: "1", "Name": "public-" + z}})
		}
	}
	first := map[annotation.Name]string{AnnotationEIPAllocations: eips[0] + "," + eips[1]}
	a := startAnnotatedWith(t, prepare, newService("web", withAnnotations(first)), addressesAre("ipv4", "subnet-0a="+eips[0], "subnet-0b="+eips[1]))

	a.refused("other Elastic IPs on the running NLB", map[annotation.Name]string{AnnotationEIPAllocations: eips[2] + "," + eips[3]},
		"keeps its addresses", "subnet-0a has "+eips[0]+", not "+eips[2], "delete and re-create the Service")
	for _, bad := range []struct {
		name string
		ann  map[annotation.Name]string
		want []string
	}{
		{"one allocation for two subnets", map[annotation.Name]string{AnnotationEIPAllocations: eips[0]}, []string{string(AnnotationEIPAllocations), "one allocation per subnet"}},
		{"not an allocation ID", map[annotation.Name]string{AnnotationEIPAllocations: "203.0.113.7,eipalloc-00000000000000002"}, []string{string(AnnotationEIPAllocations), "like eipalloc-"}},
		{"private addresses on an internet-facing NLB", map[annotation.Name]string{AnnotationPrivateIPv4Addresses: "10.0.0.9,10.0.1.9"}, []string{string(AnnotationPrivateIPv4Addresses), "internal load balancers"}},
		{"ip address type ipv6", map[annotation.Name]string{AnnotationEIPAllocations: eips[0] + "," + eips[1], AnnotationIPAddressType: "ipv6"}, []string{string(AnnotationIPAddressType), "ipv4, dualstack"}},
	} {
		a.refused(bad.name, bad.ann, bad.want...)
		if err := addressesAre("ipv4", "subnet-0a="+eips[0], "subnet-0b="+eips[1])(a.e); err != nil {
			t.Errorf("%s changed the NLB: %v", bad.name, err)
		}
	}
	dual := map[annotation.Name]string{AnnotationEIPAllocations: eips[0] + "," + eips[1], AnnotationIPAddressType: "dualstack"}
	a.change("dual-stack in place, IPv6 clients let in", dual, addressesAre("dualstack", "subnet-0a="+eips[0], "subnet-0b="+eips[1]), "SetIpAddressType", "AuthorizeSecurityGroupIngress")
	a.resyncChangesNothing()
	a.change("back to IPv4", first, addressesAre("ipv4", "subnet-0a="+eips[0], "subnet-0b="+eips[1]), "SetIpAddressType", "RevokeSecurityGroupIngress")
	a.change("annotations removed: the running NLB keeps its Elastic IPs, quietly", nil, addressesAre("ipv4", "subnet-0a="+eips[0], "subnet-0b="+eips[1]), "none")
	a.resyncChangesNothing()
}

// TestPrivateAddressAnnotationThroughController: private addresses of an
// internal NLB through the upstream service controller: made with them;
// bad values (not IPv4, outside the subnets, too few) are a Warning naming
// the annotation and change nothing; other addresses on the running NLB
// are a LoadBalancerAddressesKept warning that changes nothing; removing
// the annotation keeps the addresses quietly.
func TestPrivateAddressAnnotationThroughController(t *testing.T) {
	first := map[annotation.Name]string{AnnotationInternal: "true", AnnotationPrivateIPv4Addresses: "10.0.11.50,10.0.10.50"}
	kept := addressesAre("ipv4", "subnet-1a=10.0.10.50", "subnet-1b=10.0.11.50")
	a := startAnnotated(t, newService("web", withAnnotations(first)), kept)
	a.resyncChangesNothing()
	for _, bad := range []struct {
		name string
		ann  map[annotation.Name]string
		want []string
	}{
		{"not an IPv4 address", map[annotation.Name]string{AnnotationInternal: "true", AnnotationPrivateIPv4Addresses: "10.0.10.50,fd00::5"}, []string{string(AnnotationPrivateIPv4Addresses), `"fd00::5" is not an IPv4 address`}},
		{"outside the subnets", map[annotation.Name]string{AnnotationInternal: "true", AnnotationPrivateIPv4Addresses: "10.0.10.50,10.0.0.50"}, []string{string(AnnotationPrivateIPv4Addresses), "10.0.0.50 is not in one of them"}},
		{"one for two subnets", map[annotation.Name]string{AnnotationInternal: "true", AnnotationPrivateIPv4Addresses: "10.0.10.50"}, []string{string(AnnotationPrivateIPv4Addresses), "one address in each subnet"}},
	} {
		a.refused(bad.name, bad.ann, bad.want...)
		if err := kept(a.e); err != nil {
			t.Errorf("%s changed the NLB: %v", bad.name, err)
		}
	}
	a.refused("other addresses on the running NLB", map[annotation.Name]string{AnnotationInternal: "true", AnnotationPrivateIPv4Addresses: "10.0.10.60,10.0.11.60"},
		"keeps its addresses", "subnet-1a has 10.0.10.50, not 10.0.10.60")
	a.change("annotation removed: the addresses stay, quietly", map[annotation.Name]string{AnnotationInternal: "true"}, kept, "none")
	a.resyncChangesNothing()
}

// TestPrivateAddressesOfAnInternalNLB: private addresses go to the
// subnets holding them; one outside the NLB's subnets is refused before
// anything is made.
func TestPrivateAddressesOfAnInternalNLB(t *testing.T) {
	e := newEnv(t)
	lb, _ := e.cloud.LoadBalancer()
	bad := newService("web", withAnnotations(map[annotation.Name]string{AnnotationInternal: "true", AnnotationPrivateIPv4Addresses: "10.0.11.50,10.0.0.50"}))
	_, err := lb.EnsureLoadBalancer(context.Background(), testCluster, bad, nil)
	if ue, ok := backends.AsUserError(err); !ok || ue.Reason != annotation.ReasonInvalid || !strings.Contains(err.Error(), "10.0.0.50 is not in one of them") {
		t.Fatalf("err = %v, want an %s error naming 10.0.0.50", err, annotation.ReasonInvalid)
	}
	e.assertNoMutation(t, "a Service with an address outside its subnets")
	e.ensure(t, newService("web", withAnnotations(map[annotation.Name]string{AnnotationInternal: "true", AnnotationPrivateIPv4Addresses: "10.0.11.50,10.0.10.50"})), nil)
	if err := addressesAre("ipv4", "subnet-1a=10.0.10.50", "subnet-1b=10.0.11.50")(e); err != nil {
		t.Error(err)
	}
}
