package baremetal

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// lbSection has a small dual-stack auto pool, a manual pool and a pool for
// one namespace.
const lbSection = `
addressPools:
- name: auto
  addresses: ["192.0.2.0/30", "2001:db8::/127"]
- name: manual
  addresses: ["198.51.100.10-198.51.100.12"]
  autoAssign: false
- name: team
  addresses: ["203.0.113.0/29"]
  namespaces: [team-a]
`

func newTestLB(t testing.TB, section string) *LoadBalancer {
	t.Helper()
	c := newTestCloud(t, section)
	lb, ok := c.LoadBalancer()
	if !ok {
		t.Fatal("no load balancer")
	}
	l := lb.(*LoadBalancer)
	l.Seed(nil)
	return l
}

type svcTweak = testutil.ServiceTweak

var (
	newService     = testutil.NewService
	withAnnotation = testutil.WithAnnotation
	withNamespace  = testutil.WithNamespace
)

func withShared(key string) svcTweak { return withAnnotation(string(annotation.AllowSharedIP), key) }

func withIPs(ips string) svcTweak { return withAnnotation(string(annotation.LoadBalancerIPs), ips) }

func withPool(name string) svcTweak { return withAnnotation(AddressPoolAnnotation, name) }

func withPorts(ports ...int32) svcTweak {
	return func(s *corev1.Service) {
		s.Spec.Ports = nil
		for _, p := range ports {
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Port: p, Protocol: corev1.ProtocolTCP})
		}
	}
}

func withUDP(port int32) svcTweak {
	return func(s *corev1.Service) {
		s.Spec.Ports = []corev1.ServicePort{{Port: port, Protocol: corev1.ProtocolUDP}}
	}
}

func withFamilies(policy corev1.IPFamilyPolicy, fams ...corev1.IPFamily) svcTweak {
	return func(s *corev1.Service) {
		s.Spec.IPFamilyPolicy = ptr.To(policy)
		s.Spec.IPFamilies = fams
	}
}

func withLocal(selector map[string]string) svcTweak {
	return func(s *corev1.Service) {
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		s.Spec.Selector = selector
	}
}

func withStatus(ips ...string) svcTweak {
	return func(s *corev1.Service) {
		for _, ip := range ips {
			s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
		}
	}
}

func ingressIPs(st *corev1.LoadBalancerStatus) string {
	if st == nil {
		return ""
	}
	var ips []string
	for _, ing := range st.Ingress {
		ips = append(ips, ing.IP)
	}
	return strings.Join(ips, ",")
}

const (
	v4   = corev1.IPv4Protocol
	v6   = corev1.IPv6Protocol
	dual = corev1.IPFamilyPolicyRequireDualStack
)

// step is one call in a load-balancer scenario.
type step struct {
	svc    *corev1.Service
	delete bool
	// want is the comma-separated ingress IPs, or "" with wantErr.
	want       string
	wantErr    string
	wantReason string
}

func ensure(svc *corev1.Service, want string) step { return step{svc: svc, want: want} }

func ensureErr(svc *corev1.Service, reason, msg string) step {
	return step{svc: svc, wantErr: msg, wantReason: reason}
}

func del(svc *corev1.Service) step { return step{svc: svc, delete: true} }

func TestEnsureLoadBalancer(t *testing.T) {
	tests := []struct {
		name  string
		steps []step
	}{
		{name: "first free address, idempotent", steps: []step{
			ensure(newService("a"), "192.0.2.1"),
			ensure(newService("a"), "192.0.2.1"),
			ensure(newService("b"), "192.0.2.2"),
		}},
		{name: "exhaustion is a clear error", steps: []step{
			ensure(newService("a"), "192.0.2.1"),
			ensure(newService("b"), "192.0.2.2"),
			ensureErr(newService("c"), ReasonAddressPoolExhausted, "pools auto (2 of 2 in use) are exhausted"),
		}},
		{name: "released on delete and reused", steps: []step{
			ensure(newService("a"), "192.0.2.1"),
			ensure(newService("b"), "192.0.2.2"),
			del(newService("a")),
			del(newService("a")),
			ensure(newService("c"), "192.0.2.1"),
		}},
		{name: "requested address from a manual pool", steps: []step{
			ensure(newService("a", withIPs("198.51.100.11")), "198.51.100.11"),
			ensureErr(newService("b", withIPs("198.51.100.11")), ReasonIPInUse, "in use by Service default/a"),
		}},
		{name: "spec.loadBalancerIP honoured", steps: []step{
			ensure(newService("a", func(s *corev1.Service) { s.Spec.LoadBalancerIP = "198.51.100.12" }), "198.51.100.12"),
		}},
		{name: "annotation wins over spec.loadBalancerIP", steps: []step{
			ensure(newService("a", withIPs("198.51.100.10"), func(s *corev1.Service) { s.Spec.LoadBalancerIP = "198.51.100.12" }), "198.51.100.10"),
		}},
		{name: "bad spec.loadBalancerIP", steps: []step{
			ensureErr(newService("a", func(s *corev1.Service) { s.Spec.LoadBalancerIP = "nope" }), ReasonInvalidLoadBalancerIPs, "spec.loadBalancerIP"),
		}},
		{name: "requested address outside pools", steps: []step{
			ensureErr(newService("a", withIPs("10.9.9.9")), ReasonIPNotInPool, "in none of the address pools [auto manual team]"),
		}},
		{name: "requested network address", steps: []step{
			ensureErr(newService("a", withIPs("192.0.2.0")), ReasonIPNotInPool, "network or broadcast"),
		}},
		{name: "bad annotation", steps: []step{
			ensureErr(newService("a", withIPs("192.0.2.1,192.0.2.2")), ReasonInvalidLoadBalancerIPs, string(annotation.LoadBalancerIPs)),
			ensureErr(newService("a", withShared("a b")), ReasonInvalidAllowSharedIP, string(annotation.AllowSharedIP)),
		}},
		{name: "requested IP changes the address; the released one is reused last", steps: []step{
			ensure(newService("a"), "192.0.2.1"),
			ensure(newService("a", withIPs("198.51.100.10")), "198.51.100.10"),
			ensure(newService("b"), "192.0.2.2"),
			ensure(newService("c"), "192.0.2.1"),
		}},
		// A refused change releases what was assigned (the router takes
		// it out of the status, as MetalLB does); what a status still shows
		// stays taken (TestRefusedRequestReleasesAssignment). No status
		// here: Seed(nil).
		{name: "refused change releases what was assigned", steps: []step{
			ensure(newService("a", withIPs("198.51.100.10")), "198.51.100.10"),
			ensureErr(newService("a", withIPs("10.0.0.1")), ReasonIPNotInPool, "none of the address pools"),
			ensure(newService("b", withIPs("198.51.100.10")), "198.51.100.10"),
			ensure(newService("c"), "192.0.2.1"),
			ensureErr(newService("c", withShared("a b")), ReasonInvalidAllowSharedIP, string(annotation.AllowSharedIP)),
			ensure(newService("d", withIPs("192.0.2.1")), "192.0.2.1"),
		}},
		{name: "namespace pools", steps: []step{
			ensure(newService("a", withNamespace("team-a"), withPool("team")), "203.0.113.1"),
			ensureErr(newService("b", withPool("team")), ReasonAddressPoolNotAllowed, "serves only namespaces [team-a]"),
			ensureErr(newService("c", withIPs("203.0.113.2")), ReasonAddressPoolNotAllowed, "serves only namespaces [team-a]"),
		}},
		{name: "unknown pool", steps: []step{
			ensureErr(newService("a", withPool("nope")), ReasonUnknownAddressPool, "use one of [auto manual team]"),
			ensureErr(newService("a", withPool(" ")), ReasonUnknownAddressPool, "is empty"),
		}},
		{name: "named manual pool auto-assigns from it", steps: []step{
			ensure(newService("a", withPool("manual")), "198.51.100.10"),
		}},
		{name: "requested address must match the named pool", steps: []step{
			ensureErr(newService("a", withPool("manual"), withIPs("192.0.2.1")), ReasonIPNotInPool, `names pool "manual"`),
		}},
		{name: "sharing with the same key and other ports", steps: []step{
			ensure(newService("a", withShared("k"), withPorts(80)), "192.0.2.1"),
			ensure(newService("b", withShared("k"), withPorts(443)), "192.0.2.1"),
			ensure(newService("c", withShared("k"), withPorts(80)), "192.0.2.2"),
			ensure(newService("d", withShared("k"), withUDP(80)), "192.0.2.1"),
		}},
		{name: "no sharing across keys", steps: []step{
			ensure(newService("a", withShared("k"), withIPs("198.51.100.10")), "198.51.100.10"),
			ensureErr(newService("b", withShared("other"), withPorts(443), withIPs("198.51.100.10")), ReasonIPInUse, `key "k" differs`),
			ensureErr(newService("c", withPorts(443), withIPs("198.51.100.10")), ReasonIPInUse, "same "+string(annotation.AllowSharedIP)),
			ensureErr(newService("d", withShared("k"), withIPs("198.51.100.10")), ReasonIPInUse, "both use port 80/TCP"),
			ensure(newService("e", withShared("k"), withPorts(443), withIPs("198.51.100.10")), "198.51.100.10"),
		}},
		{name: "sharing with Local traffic policy needs the same selector", steps: []step{
			ensure(newService("a", withShared("k"), withLocal(map[string]string{"app": "x"})), "192.0.2.1"),
			ensure(newService("b", withShared("k"), withPorts(443), withLocal(map[string]string{"app": "y"})), "192.0.2.2"),
			ensure(newService("c", withShared("k"), withPorts(8080), withLocal(map[string]string{"app": "x"})), "192.0.2.1"),
		}},
		{name: "shared address freed when its last holder leaves", steps: []step{
			ensure(newService("a", withShared("k"), withPorts(80)), "192.0.2.1"),
			ensure(newService("b", withShared("k"), withPorts(443)), "192.0.2.1"),
			del(newService("a")),
			ensure(newService("c"), "192.0.2.2"),
			del(newService("b")),
			ensure(newService("d"), "192.0.2.1"),
		}},
		{name: "changed key moves a Service off a shared address", steps: []step{
			ensure(newService("a", withShared("k"), withPorts(80)), "192.0.2.1"),
			ensure(newService("b", withShared("k"), withPorts(443)), "192.0.2.1"),
			ensure(newService("b", withShared("j"), withPorts(443)), "192.0.2.2"),
			ensure(newService("b", withShared("j"), withPorts(443)), "192.0.2.2"),
		}},
		{name: "dual stack", steps: []step{
			ensure(newService("a", withFamilies(dual, v6, v4)), "2001:db8::,192.0.2.1"),
			ensure(newService("b", withFamilies(corev1.IPFamilyPolicyPreferDualStack, v4, v6)), "192.0.2.2,2001:db8::1"),
			ensureErr(newService("c", withFamilies(dual, v4, v6)), ReasonAddressPoolExhausted, "no free IPv4 address"),
			ensureErr(newService("d", withFamilies(corev1.IPFamilyPolicySingleStack, v6)), ReasonAddressPoolExhausted, "no free IPv6 address"),
		}},
		{name: "single stack IPv6 exhausted", steps: []step{
			ensure(newService("a", withFamilies(corev1.IPFamilyPolicySingleStack, v6)), "2001:db8::"),
			ensure(newService("b", withFamilies(corev1.IPFamilyPolicySingleStack, v6)), "2001:db8::1"),
			ensureErr(newService("c", withFamilies(corev1.IPFamilyPolicySingleStack, v6)), ReasonAddressPoolExhausted, "no free IPv6 address"),
		}},
		{name: "prefer dual stack without a pool for the second family", steps: []step{
			ensure(newService("a", withNamespace("team-a"), withPool("team"), withFamilies(corev1.IPFamilyPolicyPreferDualStack, v4, v6)), "203.0.113.1"),
			ensureErr(newService("b", withNamespace("team-a"), withPool("team"), withFamilies(dual, v4, v6)), ReasonIPFamilyUnavailable, "no IPv6 address pool"),
		}},
		{name: "family policy change re-evaluated", steps: []step{
			ensure(newService("a"), "192.0.2.1"),
			ensure(newService("a", withFamilies(dual, v4, v6)), "192.0.2.1,2001:db8::"),
			ensure(newService("a", withFamilies(corev1.IPFamilyPolicySingleStack, v4)), "192.0.2.1"),
			ensure(newService("b", withFamilies(corev1.IPFamilyPolicySingleStack, v6)), "2001:db8::1"),
			ensure(newService("c", withFamilies(corev1.IPFamilyPolicySingleStack, v6)), "2001:db8::"),
		}},
		{name: "requested address of a family the Service lacks", steps: []step{
			ensureErr(newService("a", withIPs("2001:db8::1"), withFamilies(corev1.IPFamilyPolicySingleStack, v4)), ReasonInvalidLoadBalancerIPs, "the Service's IP families are [IPv4]"),
			ensure(newService("a", withIPs("2001:db8::1"), withFamilies(corev1.IPFamilyPolicySingleStack)), "2001:db8::1"),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lb := newTestLB(t, lbSection)
			for i, s := range tt.steps {
				runStep(t, lb, i, s)
			}
		})
	}
}

func runStep(t *testing.T, lb *LoadBalancer, i int, s step) {
	t.Helper()
	ctx := context.Background()
	if s.delete {
		if err := lb.EnsureLoadBalancerDeleted(ctx, "c1", s.svc); err != nil {
			t.Fatalf("step %d: delete %s: %v", i, s.svc.Name, err)
		}
		if _, exists, err := lb.GetLoadBalancer(ctx, "c1", s.svc); exists || err != nil {
			t.Fatalf("step %d: after delete GetLoadBalancer = %v, %v", i, exists, err)
		}
		return
	}
	st, err := lb.EnsureLoadBalancer(ctx, "c1", s.svc, nil)
	if s.wantErr != "" {
		ue, ok := backends.AsUserError(err)
		if err == nil || !ok || ue.Reason != s.wantReason || !strings.Contains(err.Error(), s.wantErr) || strings.Contains(err.Error(), `"metal"`) {
			t.Fatalf("step %d: ensure %s = %v, %v; want user error %s containing %q and not the backend's name (the router adds it)", i, s.svc.Name, ingressIPs(st), err, s.wantReason, s.wantErr)
		}
		if uerr := lb.UpdateLoadBalancer(ctx, "c1", s.svc, nil); s.wantReason == ReasonInvalidLoadBalancerIPs || s.wantReason == ReasonInvalidAllowSharedIP {
			if uerr == nil {
				t.Errorf("step %d: UpdateLoadBalancer accepted an invalid Service", i)
			}
		}
		return
	}
	if err != nil || ingressIPs(st) != s.want {
		t.Fatalf("step %d: ensure %s = %q, %v; want %q", i, s.svc.Name, ingressIPs(st), err, s.want)
	}
	for _, ing := range st.Ingress {
		if ing.IPMode == nil || *ing.IPMode != corev1.LoadBalancerIPModeVIP {
			t.Errorf("step %d: ingress %s without IPMode VIP", i, ing.IP)
		}
	}
	got, exists, err := lb.GetLoadBalancer(ctx, "c1", s.svc)
	if err != nil || !exists || ingressIPs(got) != s.want {
		t.Fatalf("step %d: GetLoadBalancer %s = %q, %v, %v; want %q", i, s.svc.Name, ingressIPs(got), exists, err, s.want)
	}
	if err := lb.UpdateLoadBalancer(ctx, "c1", s.svc, nil); err != nil {
		t.Errorf("step %d: UpdateLoadBalancer: %v", i, err)
	}
}

func TestGetLoadBalancerUnknownService(t *testing.T) {
	lb := newTestLB(t, lbSection)
	st, exists, err := lb.GetLoadBalancer(context.Background(), "c1", newService("a"))
	if st != nil || exists || err != nil {
		t.Errorf("GetLoadBalancer = %v, %v, %v; want nil, false, nil", st, exists, err)
	}
	if name := lb.GetLoadBalancerName(context.Background(), "c1", newService("a")); name != "auida" {
		t.Errorf("GetLoadBalancerName = %q", name)
	}
}

func TestNotSeededRefuses(t *testing.T) {
	c := newTestCloud(t, lbSection)
	l, _ := c.LoadBalancer()
	lb := l.(*LoadBalancer)
	ctx := context.Background()
	if _, err := lb.EnsureLoadBalancer(ctx, "c1", newService("a"), nil); err == nil || !strings.Contains(err.Error(), "SetInformers") {
		t.Errorf("EnsureLoadBalancer before seeding: %v", err)
	}
	if _, _, err := lb.GetLoadBalancer(ctx, "c1", newService("a")); err == nil {
		t.Error("GetLoadBalancer before seeding succeeded")
	}
	if err := lb.EnsureLoadBalancerDeleted(ctx, "c1", newService("a")); err == nil {
		t.Error("EnsureLoadBalancerDeleted before seeding succeeded")
	}
}

func TestSeedFromStatus(t *testing.T) {
	tests := []struct {
		name    string
		seed    []*corev1.Service
		steps   []step
		holders int
	}{
		{name: "status addresses are taken", holders: 1,
			seed: []*corev1.Service{newService("old", withStatus("192.0.2.1"))},
			steps: []step{
				ensure(newService("new"), "192.0.2.2"),
				ensure(newService("old"), "192.0.2.1"),
				ensureErr(newService("third", withIPs("192.0.2.1")), ReasonIPInUse, "default/old"),
			}},
		{name: "addresses outside the pools are not ours", holders: 0,
			seed:  []*corev1.Service{newService("aws", withStatus("10.1.2.3"))},
			steps: []step{ensure(newService("new"), "192.0.2.1")}},
		{name: "a Service of another controller keeps its address", holders: 1,
			seed:  []*corev1.Service{newService("other", withStatus("192.0.2.1"), func(s *corev1.Service) { s.Spec.LoadBalancerClass = ptr.To("x.io/lb") })},
			steps: []step{ensure(newService("new"), "192.0.2.2")}},
		{name: "shared addresses keep sharing", holders: 2,
			seed: []*corev1.Service{
				newService("a", withShared("k"), withPorts(80), withStatus("192.0.2.1")),
				newService("b", withShared("k"), withPorts(443), withStatus("192.0.2.1")),
			},
			steps: []step{
				ensure(newService("c", withShared("k"), withPorts(8080)), "192.0.2.1"),
				ensure(newService("d"), "192.0.2.2"),
			}},
		{name: "a bad key in a status holder shares nothing", holders: 1,
			seed:  []*corev1.Service{newService("a", withShared("a b"), withPorts(80), withStatus("192.0.2.1"))},
			steps: []step{ensureErr(newService("c", withShared("a"), withPorts(443), withIPs("192.0.2.1")), ReasonIPInUse, "default/a")}},
		{name: "two holders of one exclusive address: both stay, each is told", holders: 2,
			seed: []*corev1.Service{newService("a", withStatus("192.0.2.1")), newService("b", withStatus("192.0.2.1"))},
			steps: []step{
				ensure(newService("a"), "192.0.2.2"),
				ensure(newService("b"), "192.0.2.1"),
			}},
		{name: "network address in a status is held but never kept", holders: 1,
			seed:  []*corev1.Service{newService("a", withStatus("192.0.2.0"))},
			steps: []step{ensure(newService("a"), "192.0.2.1")}},
		{name: "dual-stack status", holders: 1,
			seed: []*corev1.Service{newService("a", withFamilies(dual, v4, v6), withStatus("192.0.2.2", "2001:db8::1"))},
			steps: []step{
				ensure(newService("a", withFamilies(dual, v4, v6)), "192.0.2.2,2001:db8::1"),
				ensure(newService("b", withFamilies(dual, v6, v4)), "2001:db8::,192.0.2.1"),
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newTestCloud(t, lbSection)
			l, _ := c.LoadBalancer()
			lb := l.(*LoadBalancer)
			lb.Seed(tt.seed)
			if got := lb.holders(); got != tt.holders {
				t.Errorf("seeded %d holders, want %d", got, tt.holders)
			}
			for _, s := range tt.seed {
				_, exists, err := lb.GetLoadBalancer(context.Background(), "c1", s)
				if wantOurs := lb.alloc.holdingOf(serviceKey(s)) != nil; exists != wantOurs || err != nil {
					t.Errorf("GetLoadBalancer(%s) = %v, %v", s.Name, exists, err)
				}
			}
			for i, s := range tt.steps {
				runStep(t, lb, i, s)
			}
		})
	}
}

func TestConcurrentEnsureNoDuplicates(t *testing.T) {
	lb := newTestLB(t, "addressPools: [{name: p, addresses: [10.0.0.0/24]}]")
	const n = 200
	var wg sync.WaitGroup
	results := make([]string, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			st, err := lb.EnsureLoadBalancer(context.Background(), "c1", newService(fmt.Sprintf("s%d", i)), nil)
			results[i], errs[i] = ingressIPs(st), err
		})
	}
	wg.Wait()
	seen := map[string]int{}
	for i, ip := range results {
		if errs[i] != nil {
			t.Fatalf("s%d: %v", i, errs[i])
		}
		if prev, dup := seen[ip]; dup {
			t.Fatalf("%s handed to s%d and s%d", ip, prev, i)
		}
		seen[ip] = i
	}
	if len(seen) != n || slices.Contains(results, "") {
		t.Fatalf("%d distinct addresses for %d Services", len(seen), n)
	}
}
