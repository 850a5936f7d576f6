package openstack

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/plan"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router"
)

// TestDryRunAdoptsOCCMFloatingIP is `multicloud-ccm plan` on a Service
// OCCM served with a floating IP, on the real Octavia: a dry-run
// EnsureLoadBalancer says "adopted" (one intent, the adoption's tag) and
// nothing else, answers OCCM's floating IP, and makes no write to Octavia
// or Neutron; then the real switch (the upstream service controller over
// the router) does exactly that: it tags the load balancer and creates or
// deletes nothing.
func TestDryRunAdoptsOCCMFloatingIP(t *testing.T) {
	t.Parallel()
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
	// The adoption alone: the backend's defaults are OCCM's (one retry
	// up, three down), so OCCM's listener, pool, members and monitor stay
	// as they are.
	if got := intents(); len(got) != 1 || got[0].Kind != backends.IntentAdopt {
		t.Errorf("dry-run intents %+v, want the adoption alone", got)
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

	// The same through `multicloud-ccm plan`'s planner, over the cluster
	// as OCCM left it (its floating IP in the status).
	inCluster := svc.DeepCopy()
	inCluster.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: fip}}
	cluster := fake.NewClientset(nodes[0].DeepCopy(), inCluster)
	rep, err := plan.Run(t.Context(), plan.Options{
		Config:   &config.CloudConfig{ClusterID: e.cloud.lb.clusterID, LoadBalancer: config.LoadBalancer{DefaultBackend: "os"}},
		Client:   cluster,
		Backends: []router.Backend{{Name: "os", Type: "openstack", Scheme: "openstack", Cloud: e.cloud}},
	})
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	// (The node, with no instance in this Nova-less stack, is refused:
	// the load balancers are what this test plans.)
	if s := rep.Summary; s.LBAdopted != 1 || s.LBCreated != 0 || s.LBReplaced != 0 || s.LBRefused != 0 || s.LBChanges != 0 {
		t.Errorf("plan summary %q (%+v), want 1 adopted, 0 changes", s, rep.Services)
	}
	if w := e.octavia.Writes()[octaviaBefore:]; len(w) != 0 {
		t.Errorf("the plan wrote to Octavia: %q", w)
	}
	if n := f.Mutates.Load() - neutronBefore; n != 0 {
		t.Errorf("the plan made %d Neutron calls changing something", n)
	}
	for _, a := range cluster.Actions() {
		if a.GetVerb() != "list" {
			t.Errorf("the plan made a %s of %s in the cluster", a.GetVerb(), a.GetResource().Resource)
		}
	}

	e.apply(t, svc)
	e.waitDetail(t, svc, "TCP/80 conn=-1 t=50000/5000/50000/0 xff= pool=TCP:ROUND_ROBIN monitor=TCP:5/3/1/3 members=n1", func(st corev1.LoadBalancerStatus) error {
		if len(st.Ingress) != 1 || st.Ingress[0].IP != fip {
			return fmt.Errorf("status %+v, want OCCM's floating IP %s", st, fip)
		}
		return nil
	})
	if w := e.octavia.Writes()[octaviaBefore:]; len(w) != 1 || !strings.HasPrefix(w[0], "PUT ") {
		t.Errorf("the switch made %q, want the adoption's tag (one PUT) alone, as planned", w)
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

// TestDryRunSharing is `multicloud-ccm plan` on OCCM's load-balancer
// sharing, on the real Octavia: a Service about to join another's load
// balancer (load-balancer-id) is planned as the join and its listener; once
// joined and unchanged, as nothing; with its load-balancer-id removed, as
// its listener removed, the load balancer left and one of its own created.
// No plan writes to Octavia, and the shared load balancer is as before.
func TestDryRunSharing(t *testing.T) {
	t.Parallel()
	nodes := []*corev1.Node{readyNode("n1", "10.27.3.1", nil)}
	e := newSvcEnv(t, nil, nodes...)
	owner := portService("owner", 80, 30080)
	t.Cleanup(func() { deleteConverged(t, e.cloud.lb, owner) })
	e.apply(t, owner)
	lb := e.waitDetail(t, owner, "TCP/80 conn=-1 t=50000/5000/50000/0 xff= pool=TCP:ROUND_ROBIN monitor=TCP:5/3/1/3 members=n1", func(corev1.LoadBalancerStatus) error { return nil })
	sharer := portService("sharer", 8080, 30081, withAnnotation(AnnotationLoadBalancerID, lb.ID))
	t.Cleanup(func() { deleteConverged(t, e.cloud.lb, portService("sharer", 8080, 30081)) })

	// The plans are made while the service controller is idle (its writes
	// would be counted), except while waiting for it to converge.
	tryPlan := func(svc *corev1.Service) ([]backends.Intent, error) {
		ctx, intents := backends.WithDryRun(t.Context())
		_, err := e.cloud.lb.EnsureLoadBalancer(ctx, "kubernetes", svc.DeepCopy(), nodes)
		return intents(), err
	}
	planOf := func(svc *corev1.Service) []backends.Intent {
		t.Helper()
		// The load balancer is ACTIVE again once Octavia applied the
		// service controller's last change.
		eventuallyOn(t, 120*time.Second, "a plan for "+svc.Name+" without an error", func() error {
			_, err := tryPlan(svc)
			return err
		})
		before := len(e.octavia.Writes())
		got, err := tryPlan(svc)
		if w := e.octavia.Writes()[before:]; len(w) != 0 {
			t.Errorf("the dry run wrote to Octavia: %q", w)
		}
		if err != nil {
			t.Fatalf("dry-run EnsureLoadBalancer of %s: %v", svc.Name, err)
		}
		return got
	}
	wantIntents := func(what string, got []backends.Intent, want ...string) {
		t.Helper()
		var whats []string
		for _, in := range got {
			whats = append(whats, string(in.Kind)+": "+in.What)
		}
		if !slices.Equal(whats, want) {
			t.Errorf("%s: planned\n%q\nwant\n%q", what, whats, want)
		}
	}

	wantIntents("joining", planOf(sharer),
		": shared load balancer "+lb.ID+" joined by default/sharer",
		": listener TCP:8080 created with its pool and 1 members and a health monitor")

	e.apply(t, sharer)
	eventuallyOn(t, 120*time.Second, "the sharer's listener on the owner's load balancer", func() error {
		if got, err := listenersOn(t, e.cloud, lb.ID); err != nil || got != "TCP/80,TCP/8080" {
			return fmt.Errorf("listeners %s (%w), want TCP/80,TCP/8080; warnings %q", got, err, e.warnings(t, "sharer"))
		}
		return nil
	})
	eventuallyOn(t, 120*time.Second, "the sharer converged", func() error {
		// Until the service controller's last change settles, the plan
		// finds the load balancer PENDING_UPDATE (an error to retry).
		if got, err := tryPlan(e.service(t, "sharer")); err != nil || len(got) != 0 {
			return fmt.Errorf("planned %+v (%w) for the joined sharer, want nothing", got, err)
		}
		return nil
	})
	if got := planOf(e.service(t, "sharer")); len(got) != 0 {
		t.Errorf("planned %+v for the joined, converged sharer, want nothing", got)
	}

	leaving := e.service(t, "sharer")
	delete(leaving.Annotations, string(AnnotationLoadBalancerID))
	wantIntents("leaving", planOf(leaving),
		": listener TCP:8080 of default/sharer deleted with its pool",
		": shared load balancer "+lb.ID+" left by default/sharer",
		"create: load balancer "+e.cloud.lb.lbName(leaving)+" created",
		": listener TCP:8080 created with its pool and 1 members and a health monitor")
	if got, err := listenersOn(t, e.cloud, lb.ID); err != nil || got != "TCP/80,TCP/8080" {
		t.Errorf("after the plans, listeners %s (%v), want TCP/80,TCP/8080", got, err)
	}
}

// TestDryRunListsFloatingIPReleases: `plan` lists a floating IP's release
// as the switch makes it, on the real Octavia with a fake Neutron. A
// Service deleted (moved to another backend) whose load balancer has the
// floating IP the backend allocated: the release (a DELETE) and then the
// load balancer's delete, and with keep-floatingip the disassociation (a
// PUT) instead; a Service turned internal: the release; one requesting a
// floating IP the user allocated: its own released, the requested one
// associated (before: one "PUT/DELETE"). The dry run lists
// each once (its floating IP still carries the load balancer's name, so
// the leftovers' listing found it again) and makes no Neutron write; the
// switch then makes exactly the Neutron calls listed. Before, the delete
// was one intent, "deleted with its listeners, pools and floating IP",
// also when the floating IP was kept, a release was "PUT/DELETE", and the
// release of a Service turned internal, its address going, was a change,
// not a replacement: the plan said adopted and exited 0.
func TestDryRunListsFloatingIPReleases(t *testing.T) {
	t.Parallel()
	f := NewFakeOpenStack(t)
	f.AnyToken = true
	s := realOctavia(t)
	s.Endpoints.Network = f.NetworkURL()
	s.LoadBalancer.FloatingNetworkID = floatingNet
	c := newRealCloud(t, s, "t"+randomID(t))
	nodes := []*corev1.Node{newNode("n1", withInternalIP("10.4.9.1"))}
	neutronCalls := func(method string) int { return f.CallsUnder(method, "/network/v2.0/floatingips") }
	for _, tc := range []struct {
		name      string
		ann       map[string]string
		internal  bool
		requested string
		want      []string
	}{
		{name: "released", want: []string{"openstack: DELETE floating IP", "openstack: DELETE load balancer (cascade)"}},
		{name: "kept", ann: map[string]string{string(AnnotationKeepFloatingIP): "true"}, want: []string{"openstack: PUT floating IP", "openstack: DELETE load balancer (cascade)"}},
		{name: "internal", internal: true, want: []string{"openstack: DELETE floating IP"}},
		// A floating IP the user allocated, then requested: its own
		// released, the requested one associated.
		{name: "requested", requested: "172.24.4.250", want: []string{"openstack: DELETE floating IP", "openstack: PUT floating IP"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := newService("fiprel-" + tc.name + "-" + randomID(t))
			for k, v := range tc.ann {
				svc.Annotations[k] = v
			}
			ensureConverged(t, c.lb, svc, nodes)
			if n := len(f.FloatingIPs()); n == 0 {
				t.Fatalf("no floating IP allocated")
			}
			del, put := neutronCalls(http.MethodDelete), neutronCalls(http.MethodPut)
			mutates := f.Mutates.Load()

			ctx, intents := backends.WithDryRun(t.Context())
			var err error
			switch {
			case tc.requested != "":
				f.AddFloatingIP(tc.requested, floatingNet)
				svc.Spec.LoadBalancerIP = tc.requested
				_, err = c.lb.EnsureLoadBalancer(ctx, "kubernetes", svc.DeepCopy(), nodes)
			case tc.internal:
				svc.Annotations[string(AnnotationInternal)] = "true"
				_, err = c.lb.EnsureLoadBalancer(ctx, "kubernetes", svc.DeepCopy(), nodes)
			default:
				err = c.lb.EnsureLoadBalancerDeleted(ctx, "kubernetes", svc.DeepCopy())
			}
			if err != nil {
				t.Fatalf("dry run: %v", err)
			}
			var calls []string
			for _, in := range intents() {
				calls = append(calls, in.Call)
			}
			if !slices.Equal(calls, tc.want) {
				t.Errorf("dry-run calls %q (%+v), want %q", calls, intents(), tc.want)
			}
			// Turned internal, the Service's address (the floating IP)
			// goes: a replacement, which the plan counts.
			if got := intents(); tc.internal && (len(got) == 0 || got[0].Kind != backends.IntentReplace) {
				t.Errorf("turned internal: intents %+v, want the floating IP's release as a replacement (%s)", got, backends.IntentReplace)
			}
			if n := f.Mutates.Load() - mutates; n != 0 {
				t.Errorf("the dry run made %d Neutron writes", n)
			}

			if tc.internal || tc.requested != "" {
				ensureConverged(t, c.lb, svc, nodes)
			} else {
				deleteConverged(t, c.lb, svc)
			}
			wantDel, wantPut := 0, 0
			for _, call := range tc.want {
				switch call {
				case "openstack: DELETE floating IP":
					wantDel++
				case "openstack: PUT floating IP":
					wantPut++
				}
			}
			if d, p := neutronCalls(http.MethodDelete)-del, neutronCalls(http.MethodPut)-put; d != wantDel || p != wantPut {
				t.Errorf("the switch made %d floating-IP deletes and %d updates, the dry run listed %d and %d", d, p, wantDel, wantPut)
			}
			if tc.internal || tc.requested != "" {
				deleteConverged(t, c.lb, svc)
			}
		})
	}
}
