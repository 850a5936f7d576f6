package openstack

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
)

// TestDryRunAdoptsOCCMFloatingIP is `multicloud-ccm plan` on a Service
// OCCM served with a floating IP, on the real Octavia: a dry-run
// EnsureLoadBalancer says "adopted" (one intent, the adoption's tag) and
// nothing else, answers OCCM's floating IP, and makes no write to Octavia
// or Neutron; then the real switch (the upstream service controller over
// the router) does exactly that: it tags the load balancer and creates or
// deletes nothing.
func TestDryRunAdoptsOCCMFloatingIP(t *testing.T) {
	f := NewFakeOpenStack(t)
	f.AnyToken = true
	nodes := []*corev1.Node{readyNode("n1", "10.27.0.1", nil)}
	e := newSvcEnv(t, func(s *Settings) {
		s.Endpoints.Network = f.NetworkURL()
		s.LoadBalancer.FloatingNetworkID = floatingNet
	}, nodes...)
	sc, err := e.cloud.lb.clients(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	svc := newService("plan-occm-" + randomID(t))
	old := createLikeOCCM(t, sc.loadBalancer, svc, nodes)
	t.Cleanup(func() { deleteConverged(t, e.cloud.lb, svc) })
	const fip = "172.24.4.78"
	f.AddFloatingIPOn(fip, floatingNet, old.VipPortID, fmt.Sprintf("Floating IP for Kubernetes external service %s/%s from cluster kubernetes", svc.Namespace, svc.Name))
	svc.Annotations[string(AnnotationLoadBalancerID)] = old.ID
	octaviaBefore, neutronBefore := len(e.octavia.Writes()), f.Mutates.Load()

	ctx, intents := backends.WithDryRun(t.Context())
	st, err := e.cloud.lb.EnsureLoadBalancer(ctx, "kubernetes", svc.DeepCopy(), nodes)
	if err != nil {
		t.Fatalf("dry-run EnsureLoadBalancer: %v", err)
	}
	// The adoption, and changes to parts that stay: OCCM's health monitor
	// retries once (its monitor-max-retries default), the backend's
	// default is 3, so the switch updates the monitor in place, and the
	// plan must say so. Nothing is created, replaced or deleted.
	got := intents()
	if len(got) == 0 || got[0].Kind != backends.IntentAdopt {
		t.Errorf("dry-run intents %+v, want the adoption first", got)
	}
	announced := map[string]bool{}
	for _, in := range got[1:] {
		if in.Kind != backends.IntentChange {
			t.Errorf("dry-run intent %+v: an adoption in place creates, replaces or deletes nothing", in)
		}
		announced[in.What] = true
	}
	if len(got) > 1 && !announced["health monitor of listener TCP:80 updated"] {
		t.Errorf("dry-run intents %+v: a change other than OCCM's health monitor", got)
	}
	if len(st.Ingress) != 1 || st.Ingress[0].IP != fip {
		t.Errorf("dry-run status %+v, want OCCM's floating IP %s", st, fip)
	}
	if w := e.octavia.Writes()[octaviaBefore:]; len(w) != 0 {
		t.Errorf("the dry run wrote to Octavia: %q", w)
	}
	if n := f.Mutates.Load() - neutronBefore; n != 0 {
		t.Errorf("the dry run made %d Neutron calls changing something", n)
	}

	e.apply(t, svc)
	e.waitDetail(t, svc, "TCP/80 conn=-1 t=50000/5000/50000/0 xff= pool=TCP:ROUND_ROBIN monitor=TCP:5/3/3/3 members=n1", func(st corev1.LoadBalancerStatus) error {
		if len(st.Ingress) != 1 || st.Ingress[0].IP != fip {
			return fmt.Errorf("status %+v, want OCCM's floating IP %s", st, fip)
		}
		return nil
	})
	for _, w := range e.octavia.Writes()[octaviaBefore:] {
		if !strings.HasPrefix(w, "PUT ") {
			t.Errorf("the switch made a call the plan did not announce: %s", w)
		}
	}
}

// TestDryRunGuard: under a dry run, a request changing something in an
// OpenStack service is refused at the transport, before it is sent;
// Keystone's login and reads pass.
func TestDryRunGuard(t *testing.T) {
	f := NewFakeOpenStack(t)
	f.AnyToken = true
	tr := &countingTransport{next: http.DefaultTransport, backend: "guard"}
	tr.services.Store(&[]serviceCounters{{endpoint: f.NetworkURL(), reads: apiRequests.WithLabelValues("guard", "network", "read"), writes: apiRequests.WithLabelValues("guard", "network", "write")}})
	ctx, _ := backends.WithDryRun(t.Context())
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, strings.TrimSuffix(f.NetworkURL(), "/")+"/v2.0/floatingips/x", nil)
	if err != nil {
		t.Fatal(err)
	}
	before := f.Mutates.Load()
	if _, err := tr.RoundTrip(req); !errors.Is(err, backends.ErrMutationInDryRun) {
		t.Errorf("DELETE under a dry run: %v, want ErrMutationInDryRun", err)
	}
	if n := f.Mutates.Load() - before; n != 0 {
		t.Errorf("Neutron saw %d changing calls", n)
	}
}
