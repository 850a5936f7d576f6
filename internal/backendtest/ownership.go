package backendtest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// convergedByCreate checks every pair of calls the controllers produce on
// an unchanged new Service: upstream's service controller creates with
// Ensure, its node sync then calls Update with the same nodes, a resync or
// an annotation edit calls Ensure again. After the first Ensure none of
// them may make a mutating call: a backend that compares a fresh load
// balancer with defaults it assumes, instead of what the cloud answers,
// writes on the first Update.
func convergedByCreate(t *testing.T, s *suite) {
	h := s.f.LoadBalancers
	svc, nodes := h.Service(t), h.Nodes(t)
	s.ensure(t, svc, nodes)
	steps := []struct {
		name string
		call func() error
	}{
		{"Update after the creating Ensure", func() error { return s.lb.UpdateLoadBalancer(s.ctx, clusterName, svc.DeepCopy(), nodes) }},
		{"Ensure after Update", func() error {
			_, err := s.lb.EnsureLoadBalancer(s.ctx, clusterName, svc.DeepCopy(), nodes)
			return err
		}},
		{"Ensure after Ensure", func() error {
			_, err := s.lb.EnsureLoadBalancer(s.ctx, clusterName, svc.DeepCopy(), nodes)
			return err
		}},
		{"Update after Ensure", func() error { return s.lb.UpdateLoadBalancer(s.ctx, clusterName, svc.DeepCopy(), nodes) }},
	}
	for _, st := range steps {
		before := h.Mutations()
		if err := st.call(); err != nil {
			t.Fatalf("%s of %s: %v", st.name, svc.Name, err)
		}
		if n := h.Mutations() - before; n != 0 {
			t.Errorf("%s of an unchanged %s made %d mutating calls, want 0", st.name, svc.Name, n)
		}
	}
	s.deleteAll(t, svc)
}

// strangersUntouched creates strangers beside a Service's load balancer
// and drives the Service through everything the controllers do to it —
// Ensure unchanged, a port added, each variant the fixture gives, nodes
// added and removed, a repair pass, a crash between the steps of a change,
// the delete — checking after each that the strangers are as they were.
func strangersUntouched(t *testing.T, s *suite) {
	h := s.f.LoadBalancers
	skipUnless(t, h.Strangers != nil, "Strangers")
	svc, nodes := h.Service(t), h.Nodes(t)
	s.ensure(t, svc, nodes)
	fingerprint := h.Strangers(t, svc)
	want := fingerprint(t)
	check := func(after string) {
		t.Helper()
		if got := fingerprint(t); got != want {
			t.Fatalf("after %s, strangers beside %s's load balancer were changed or deleted:\nbefore: %s\nafter:  %s", after, svc.Name, want, got)
		}
	}
	s.ensure(t, svc, nodes)
	check("an Ensure with nothing changed")

	cur := withExtraPort(svc)
	s.ensure(t, cur, nodes)
	check("a port added")
	if h.Variants != nil {
		for i, v := range h.Variants(t, cur) {
			s.ensure(t, v, nodes)
			check(fmt.Sprintf("variant %d (%v)", i, v.Annotations))
			cur = v
		}
	}

	more := append(append([]*corev1.Node{}, nodes...), h.Nodes(t)...)
	s.update(t, cur, more)
	check("nodes added")
	s.update(t, cur, more[:1])
	check("nodes removed")

	s.repairPass(t, cur, nodes)
	check("a repair pass")

	if h.FailMutationsAfter != nil {
		changed := withExtraPort(cur)
		for n := range 4 {
			restore := h.FailMutationsAfter(t, n)
			_ = s.whileRetry(func() error {
				_, err := s.lb.EnsureLoadBalancer(s.ctx, clusterName, changed.DeepCopy(), nodes)
				return err
			})
			restore()
			check(fmt.Sprintf("a change that crashed after %d steps", n))
		}
		s.ensure(t, changed, nodes)
		cur = changed
	}

	want = outsideLoadBalancer(want)
	s.deleteAll(t, cur)
	if got := outsideLoadBalancer(fingerprint(t)); got != want {
		t.Fatalf("after the delete, strangers beside %s's load balancer were changed or deleted:\nbefore: %s\nafter:  %s", svc.Name, want, got)
	}
}

// outsideLoadBalancer drops a fingerprint's lines about strangers inside
// the Service's load balancer (InsideLoadBalancer), which its delete takes.
func outsideLoadBalancer(fingerprint string) string {
	var kept []string
	for _, line := range strings.Split(fingerprint, "\n") {
		if !strings.HasPrefix(line, InsideLoadBalancer) {
			kept = append(kept, line)
		}
	}
	return strings.Join(kept, "\n")
}

// update calls UpdateLoadBalancer again while it asks to be retried (a
// backend that makes one change per call), failing the test on an error.
func (s *suite) update(t *testing.T, svc *corev1.Service, nodes []*corev1.Node) {
	t.Helper()
	if err := s.whileRetry(func() error {
		return s.lb.UpdateLoadBalancer(s.ctx, clusterName, svc.DeepCopy(), nodes)
	}); err != nil {
		t.Fatalf("UpdateLoadBalancer(%s): %v", svc.Name, err)
	}
}

// repairPass runs Ensure (again while it asks to be retried) under a
// drift-repair pass when the backend reads
// in bulk for one (backends.RepairPasser), else a plain Ensure, as our
// controller's repair does.
func (s *suite) repairPass(t *testing.T, svc *corev1.Service, nodes []*corev1.Node) {
	t.Helper()
	ctx, end := s.ctx, func() {}
	if rp, ok := s.f.Cloud.(backends.RepairPasser); ok {
		// A failed bulk read is tried again, as the controller's next pass
		// would (the router reads Service by Service meanwhile): the real
		// Octavia fails a listener listing now and then with a 500
		// ("'NoneType' object has no attribute 'to_dict'") when a load
		// balancer of a test running beside this one is deleted mid-list.
		// A read that keeps failing fails the test.
		for try := 1; ; try++ {
			pctx, e, err := rp.BeginRepairPass(s.ctx, clusterName)
			if err == nil {
				ctx, end = pctx, e
				break
			}
			if try == 3 {
				t.Fatalf("BeginRepairPass, %d tries: %v", try, err)
			}
			t.Logf("BeginRepairPass (try %d; trying again in a second): %v", try, err)
			time.Sleep(time.Second)
		}
	}
	defer end()
	if err := s.whileRetry(func() error {
		_, err := s.lb.EnsureLoadBalancer(ctx, clusterName, svc.DeepCopy(), nodes)
		return err
	}); err != nil {
		t.Fatalf("EnsureLoadBalancer(%s) in a repair pass: %v", svc.Name, err)
	}
}

// withExtraPort returns svc with one more TCP port.
func withExtraPort(svc *corev1.Service) *corev1.Service {
	svc = svc.DeepCopy()
	port := int32(8080)
	for _, p := range svc.Spec.Ports {
		if p.Port >= port {
			port = p.Port + 1
		}
	}
	svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{
		Name: fmt.Sprintf("extra-%d", port), Protocol: corev1.ProtocolTCP, Port: port, NodePort: 30000 + port%2000,
	})
	return svc
}
