package upstreamaws

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/multicloud-ccm/multicloud-ccm/internal/awsfake"
	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	ours "github.com/multicloud-ccm/multicloud-ccm/pkg/backends/aws"
)

// Values the annotated Services use.
const (
	certARN   = "arn:aws:acm:eu-west-1:123456789012:certificate/0b6a5c2e-7f3d-4d1e-9f00-000000000001"
	sslPolicy = "ELBSecurityPolicy-TLS13-1-2-2021-06"
	annPrefix = "service.beta.kubernetes.io/aws-load-balancer-"
)

// ourCloud builds this project's AWS backend on the fake at url, as the
// binary does from a cloud-config section, for the cluster upstream serves.
// Extra are more JSON fields of the section.
func ourCloud(t testing.TB, url, vpc string, extra ...string) cloudprovider.Interface {
	t.Helper()
	t.Setenv("OURS_AWS_KEY", "AKIDOURS")
	t.Setenv("OURS_AWS_SECRET", "secret")
	raw := fmt.Sprintf(`{"region": %q, "vpc": %q, "endpoints": {"ec2": %q, "elbv2": %q, "sts": %q},
		"credentials": {"accessKeyID": {"env": "OURS_AWS_KEY"}, "secretAccessKey": {"env": "OURS_AWS_SECRET"}}%s}`,
		region, vpc, url, url, url, strings.Join(append([]string{""}, extra...), ", "))
	settings, errs := ours.ParseSection([]byte(raw), field.NewPath("aws"), t.TempDir())
	if len(errs) > 0 {
		t.Fatalf("settings: %v", errs.ToAggregate())
	}
	c, err := ours.New(context.Background(), backends.Options{Name: "aws", ClusterID: clusterID, Settings: settings})
	if err != nil {
		t.Fatalf("our backend: %v", err)
	}
	return c
}

// adoptionServices are Services as an operator of upstream's provider
// writes them: a plain NLB, an internal one, TLS on one port, tuned health
// checks with target-group and load-balancer attributes and extra tags, and
// fixed Elastic IPs.
func adoptionServices() []*v1.Service {
	ann := func(svc *v1.Service, kv ...string) *v1.Service {
		for i := 0; i < len(kv); i += 2 {
			svc.Annotations[annPrefix+kv[i]] = kv[i+1]
		}
		return svc
	}
	return []*v1.Service{
		nlbService("plain", 80),
		ann(nlbService("private", 8080), "internal", "true"),
		ann(nlbService("tls", 80, 443), "ssl-cert", certARN, "ssl-ports", "443", "ssl-negotiation-policy", sslPolicy),
		ann(nlbService("tuned", 80), "healthcheck-protocol", "HTTP", "healthcheck-path", "/healthz", "healthcheck-port", "10254",
			"healthcheck-interval", "10", "healthcheck-timeout", "6", "healthcheck-healthy-threshold", "2", "healthcheck-unhealthy-threshold", "4",
			"target-group-attributes", "preserve_client_ip.enabled=false,proxy_protocol_v2.enabled=true",
			"cross-zone-load-balancing-enabled", "true", "additional-resource-tags", "team=payments,tier=edge"),
		ann(nlbService("fixed", 443), "eip-allocations", "eipalloc-0a1b2c3d4e5f60001,eipalloc-0a1b2c3d4e5f60002"),
	}
}

func readyNode(in awsfake.Instance) *v1.Node {
	n := node(in)
	n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}
	n.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: in.PrivateIPs[0]}}
	return n
}

// TestAdoptionFromUpstream: Services whose NLBs upstream's provider made,
// through the upstream service controller, are taken over by this
// project's backend, through the same controller, on the same fake: every
// NLB and DNS name kept, no load balancer, listener or target group created
// or deleted, no health check modified (the backend's defaults are
// upstream's), the target groups converged in place to the Services
// (attributes, TLS and addresses as annotated, every node a target),
// then no mutating call on a resync, and nothing left when the Services go
// (neither the NLBs nor the rules upstream added to the nodes' group).
func TestAdoptionFromUpstream(t *testing.T) {
	e := newEnv(t, 3)
	e.fake.AddCertificate(certARN)
	e.fake.AddAddress("eipalloc-0a1b2c3d4e5f60001")
	e.fake.AddAddress("eipalloc-0a1b2c3d4e5f60002")
	svcs := adoptionServices()
	objs := []runtime.Object{}
	for _, svc := range svcs {
		objs = append(objs, svc)
	}
	for _, in := range e.seeded.Instances {
		objs = append(objs, readyNode(in))
	}
	client := testutil.NewClientset(objs...)

	stopUpstream := testutil.StartServiceController(t, e.cloud, client, clusterID, 2)
	dns := waitForHostnames(t, client, svcs)
	checkUpstreamHonoured(t, e)
	logState(t, e, "upstream's")
	stopUpstream()
	before := e.fake.LoadBalancers()

	deleteEvents(t, client)
	e.fake.ResetCalls()
	mine := ourCloud(t, e.url, e.seeded.VPCID)
	testutil.StartServiceController(t, mine, client, clusterID, 2)
	waitForEnsured(t, client, svcs)
	testutil.Eventually(t, time.Minute, "every listener forwards to a target group of all the nodes; no other target group left", func() error {
		return converged(e)
	})
	for op, want := range map[string]int{"CreateLoadBalancer": 0, "DeleteLoadBalancer": 0, "CreateListener": 0, "DeleteListener": 0,
		"CreateTargetGroup": 0, "DeleteTargetGroup": 0, "ModifyTargetGroup": 0} {
		if got := e.fake.Calls(op); got != want {
			t.Errorf("%s calls while adopting = %d, want %d", op, got, want)
		}
	}
	t.Logf("adopting: %v", e.fake.CallCounts())
	after := e.fake.LoadBalancers()
	if len(after) != len(before) {
		t.Fatalf("after adoption %d load balancers, before %d", len(after), len(before))
	}
	for i := range after {
		if after[i].ARN != before[i].ARN || after[i].DNSName != before[i].DNSName {
			t.Errorf("load balancer %s (%s) became %s (%s)", before[i].Name, before[i].DNSName, after[i].Name, after[i].DNSName)
		}
	}
	if got := waitForHostnames(t, client, svcs); !maps.Equal(got, dns) {
		t.Errorf("status hostnames after adoption %v, before %v", got, dns)
	}
	checkOursConverged(t, e)
	logState(t, e, "adopted")

	lb, _ := mine.LoadBalancer()
	e.fake.ResetCalls()
	for _, svc := range svcs {
		if _, err := lb.EnsureLoadBalancer(context.Background(), clusterID, svc, e.nodes()); err != nil {
			t.Fatalf("EnsureLoadBalancer(%s) after adoption: %v", svc.Name, err)
		}
	}
	if m := e.fake.MutatingCalls(); len(m) != 0 {
		t.Errorf("a resync after adoption made mutating calls %v", m)
	}

	for _, svc := range svcs {
		if err := client.CoreV1().Services(svc.Namespace).Delete(context.Background(), svc.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, time.Minute, "no load balancer or target group left", func() error {
		if lbs, tgs := e.fake.LoadBalancers(), e.fake.TargetGroups(); len(lbs)+len(tgs) != 0 {
			return fmt.Errorf("%d load balancers, %d target groups", len(lbs), len(tgs))
		}
		return nil
	})
	testutil.Eventually(t, time.Minute, "no rule of upstream's left in the nodes' security group", func() error {
		if rules := e.fake.SecurityGroupIngress(e.seeded.NodeSecurityGroup); len(rules) != 0 {
			return fmt.Errorf("rules left: %v", rules)
		}
		return nil
	})
}

// deleteEvents deletes the Events of the default namespace.
func deleteEvents(t *testing.T, client kubernetes.Interface) {
	t.Helper()
	evs, err := client.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs.Items {
		if err := client.CoreV1().Events("default").Delete(context.Background(), ev.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// waitForEnsured waits for the service controller's EnsuredLoadBalancer
// event on every Service: the backend has reconciled each once.
func waitForEnsured(t *testing.T, client kubernetes.Interface, svcs []*v1.Service) {
	t.Helper()
	testutil.Eventually(t, time.Minute, "an EnsuredLoadBalancer event for every Service", func() error {
		evs, err := client.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return err
		}
		ensured := map[string]bool{}
		for _, ev := range evs.Items {
			if ev.Reason == "EnsuredLoadBalancer" {
				ensured[ev.InvolvedObject.Name] = true
			}
		}
		for _, svc := range svcs {
			if !ensured[svc.Name] {
				return fmt.Errorf("none for %s yet", svc.Name)
			}
		}
		return nil
	})
}

// waitForHostnames waits for every Service's status to name a load
// balancer and returns the names by Service.
func waitForHostnames(t *testing.T, client kubernetes.Interface, svcs []*v1.Service) map[string]string {
	t.Helper()
	out := map[string]string{}
	testutil.Eventually(t, time.Minute, "every Service has its load balancer's hostname", func() error {
		for _, svc := range svcs {
			s, err := client.CoreV1().Services(svc.Namespace).Get(context.Background(), svc.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if len(s.Status.LoadBalancer.Ingress) != 1 || s.Status.LoadBalancer.Ingress[0].Hostname == "" {
				return fmt.Errorf("service %s: status %+v", svc.Name, s.Status.LoadBalancer)
			}
			out[svc.Name] = s.Status.LoadBalancer.Ingress[0].Hostname
		}
		return nil
	})
	return out
}

// byService returns the load balancers by their kubernetes.io/service-name
// tag's Service name.
func byService(e *env) map[string]awsfake.LoadBalancerView {
	out := map[string]awsfake.LoadBalancerView{}
	for _, lb := range e.fake.LoadBalancers() {
		out[strings.TrimPrefix(lb.Tags["kubernetes.io/service-name"], "default/")] = lb
	}
	return out
}

func targetGroupsByName(e *env) map[string]awsfake.TargetGroupView {
	out := map[string]awsfake.TargetGroupView{}
	for _, tg := range e.fake.TargetGroups() {
		out[tg.Name] = tg
	}
	return out
}

// listenerGroup returns the target group a listener of lb on port forwards
// to, and the listener.
func listenerGroup(e *env, lb awsfake.LoadBalancerView, port int) (awsfake.TargetGroupView, string) {
	for _, l := range lb.Listeners {
		proto, rest, _ := strings.Cut(l, ":")
		p, tg, _ := strings.Cut(rest, "->")
		if p == fmt.Sprint(port) {
			tg, _, _ = strings.Cut(tg, " ")
			return targetGroupsByName(e)[tg], proto + ":" + rest
		}
	}
	return awsfake.TargetGroupView{}, ""
}

// checkUpstreamHonoured: the fake did what upstream asked, as AWS would.
func checkUpstreamHonoured(t *testing.T, e *env) {
	t.Helper()
	lbs := byService(e)
	if got := lbs["private"].Scheme; got != "internal" {
		t.Errorf("upstream's internal NLB has scheme %q", got)
	}
	if _, l := listenerGroup(e, lbs["tls"], 443); !strings.HasPrefix(l, "TLS:443->") || !strings.Contains(l, certARN) || !strings.Contains(l, sslPolicy) {
		t.Errorf("upstream's TLS listener is %q; want TLS with %s and %s", l, certARN, sslPolicy)
	}
	checkTuned(t, e, "upstream")
	if got := strings.Join(lbs["fixed"].Addresses, ","); !strings.Contains(got, "eipalloc-0a1b2c3d4e5f60001") || !strings.Contains(got, "eipalloc-0a1b2c3d4e5f60002") {
		t.Errorf("upstream's NLB with Elastic IPs has addresses %q", got)
	}
}

// checkTuned: the tuned Service's target group and NLB are as annotated.
func checkTuned(t *testing.T, e *env, who string) {
	t.Helper()
	lb := byService(e)["tuned"]
	tg, _ := listenerGroup(e, lb, 80)
	if tg.HealthCheckProtocol != "HTTP" || tg.HealthCheckPath != "/healthz" || tg.HealthCheckPort != "10254" || tg.HealthCheckInterval != 10 ||
		tg.HealthCheckTimeout != 6 || tg.HealthyThreshold != 2 || tg.UnhealthyThreshold != 4 {
		t.Errorf("%s: the tuned target group's health check is %+v", who, tg)
	}
	if tg.Attributes["preserve_client_ip.enabled"] != "false" || tg.Attributes["proxy_protocol_v2.enabled"] != "true" {
		t.Errorf("%s: the tuned target group's attributes are %v", who, tg.Attributes)
	}
	if lb.Attributes["load_balancing.cross_zone.enabled"] != "true" {
		t.Errorf("%s: the tuned NLB's attributes are %v", who, lb.Attributes)
	}
	if lb.Tags["team"] != "payments" || lb.Tags["tier"] != "edge" {
		t.Errorf("%s: the tuned NLB's tags are %v", who, lb.Tags)
	}
}

// converged: every listener forwards to a target group whose targets are
// all the nodes on the Service port's NodePort, and no target group is
// left that no listener uses.
func converged(e *env) error {
	used := map[string]bool{}
	for _, lb := range e.fake.LoadBalancers() {
		for _, l := range lb.Listeners {
			_, tg, _ := strings.Cut(l, "->")
			tg, _, _ = strings.Cut(tg, " ")
			used[tg] = true
		}
	}
	for name, tg := range targetGroupsByName(e) {
		if !used[name] {
			return fmt.Errorf("target group %s is used by no listener", name)
		}
		if len(tg.Targets) != len(e.seeded.Instances) {
			return fmt.Errorf("target group %s has targets %v", name, tg.Targets)
		}
		if tg.Tags["kubernetes.io/cluster/"+clusterID] == "" {
			return fmt.Errorf("target group %s is not tagged for the cluster: %v", name, tg.Tags)
		}
	}
	return nil
}

// checkOursConverged: after adoption the annotated settings hold on this
// backend's target groups and listeners.
func checkOursConverged(t *testing.T, e *env) {
	t.Helper()
	lbs := byService(e)
	if got := lbs["private"].Scheme; got != "internal" {
		t.Errorf("the adopted internal NLB has scheme %q", got)
	}
	if _, l := listenerGroup(e, lbs["tls"], 443); !strings.HasPrefix(l, "TLS:443->") || !strings.Contains(l, certARN) || !strings.Contains(l, sslPolicy) {
		t.Errorf("the adopted TLS listener is %q; want TLS with %s and %s", l, certARN, sslPolicy)
	}
	checkTuned(t, e, "ours")
	for _, svc := range adoptionServices() {
		lb := lbs[svc.Name]
		var ports []string
		for _, p := range svc.Spec.Ports {
			tg, l := listenerGroup(e, lb, int(p.Port))
			if l == "" || tg.Port != int(p.NodePort) {
				t.Errorf("service %s port %d: listener %q to target group %+v; want one on NodePort %d", svc.Name, p.Port, l, tg, p.NodePort)
			}
			ports = append(ports, fmt.Sprint(p.Port))
		}
		if len(lb.Listeners) != len(svc.Spec.Ports) {
			t.Errorf("service %s: listeners %v; want ports %v", svc.Name, lb.Listeners, ports)
		}
	}
	if got := slices.Sorted(maps.Keys(lbs)); len(got) != len(adoptionServices()) {
		t.Errorf("load balancers of Services %v", got)
	}
}

func logState(t *testing.T, e *env, what string) {
	t.Helper()
	for svc, lb := range byService(e) {
		t.Logf("%s %s: %s %s %s listeners %v addresses %v", what, svc, lb.Name, lb.Scheme, lb.DNSName, lb.Listeners, lb.Addresses)
	}
	for _, tg := range e.fake.TargetGroups() {
		t.Logf("%s target group %s: port %d, health check %s:%s%s every %ds, targets %v", what, tg.Name, tg.Port, tg.HealthCheckProtocol, tg.HealthCheckPort, tg.HealthCheckPath, tg.HealthCheckInterval, tg.Targets)
	}
}
