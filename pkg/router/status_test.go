package router

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	mcctestutil "github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/backend"
)

// TestBackendStatus: per backend, in config order, its type, health (the
// last answer's time; the last call that got none, kept after the backend
// answers again; down after three in a row), the Nodes and load balancers
// it serves once the informers are set (none counted for a capability it
// lacks), and the bare-metal pools' usage.
func TestBackendStatus(t *testing.T) {
	r, other := metalAndOther(t)
	if st := r.BackendStatus(); st[0].Nodes != nil || st[0].LoadBalancers != nil {
		t.Errorf("before the informers: nodes %v, load balancers %v; want neither counted", st[0].Nodes, st[0].LoadBalancers)
	}
	served := func(backend string) mcctestutil.ServiceTweak {
		return func(s *corev1.Service) {
			s.Annotations = map[string]string{string(annotation.LoadBalancerServedBy): backend}
		}
	}
	web := newService("web", withLBBackend("metal"))
	c := startCluster(t, r, web,
		newNode("bm-1", withLabel(string(annotation.NodeBackend), "metal"), withProviderID("baremetal://bm-1")),
		newService("s1", served("other")), newService("s2", served("other")), newService("s3"),
	)
	c.run(t, func(context.Context) {})
	ctx := context.Background()
	before := time.Now()
	if _, err := r.InstanceExists(ctx, newNode("bm-1", withProviderID("baremetal://bm-1"))); err != nil {
		t.Fatal(err)
	}
	if _, err := r.EnsureLoadBalancer(ctx, "c", web, nil); err != nil {
		t.Fatal(err)
	}
	other.setFail(errors.New("dial tcp 192.0.2.9:443: connection refused"))
	for range backend.UnreachableAfter {
		_, _, _ = r.GetLoadBalancer(ctx, "c", newService("s1", withLBBackend("other")))
	}

	// The served annotation the router writes on web reaches the informer.
	eventually(t, "web counted as metal's", func() bool { return *r.BackendStatus()[0].LoadBalancers == 1 })
	st := r.BackendStatus()
	if len(st) != 2 || st[0].Name != "metal" || st[0].Type != "baremetal" || st[1].Name != "other" || st[1].Type != "aws" {
		t.Fatalf("backends = %+v, want metal (baremetal) then other (aws)", st)
	}
	metal, oth := st[0], st[1]
	if !metal.Up || metal.LastSuccess.Before(before) || metal.LastError != nil {
		t.Errorf("metal: up %v, last success %v, last error %+v; want up, answered since %v, no error", metal.Up, metal.LastSuccess, metal.LastError, before)
	}
	if got := fmt.Sprint(*metal.Nodes, *metal.LoadBalancers, metal.Pools); got != "1 1 [{public IPv4 1 254}]" {
		t.Errorf("metal: nodes, load balancers, pools = %s; want 1 1 [{public IPv4 1 254}]", got)
	}
	if oth.Up || !oth.LastSuccess.IsZero() || oth.Nodes != nil || *oth.LoadBalancers != 2 || oth.Pools != nil {
		t.Errorf("other = %+v; want down, never answered, no nodes counted, 2 load balancers, no pools", oth)
	}
	e := oth.LastError
	if e == nil || e.Operation != "GetLoadBalancer" || e.Class != "other" || !strings.Contains(e.Message, "connection refused") || e.Time.Before(before) {
		t.Fatalf("other's last error = %+v; want GetLoadBalancer's connection refused, class other", e)
	}

	other.setFail(nil)
	_, _, _ = r.GetLoadBalancer(ctx, "c", newService("s1", withLBBackend("other")))
	if oth = r.BackendStatus()[1]; !oth.Up || oth.LastSuccess.Before(e.Time) || oth.LastError == nil || *oth.LastError != *e {
		t.Errorf("after an answer: %+v; want up, answered, the last error kept", oth)
	}
}

// TestCallErrorShortened: a long message is cut, marked so.
func TestCallErrorShortened(t *testing.T) {
	e := backend.NewCallError(backend.OpListRoutes, errors.New(strings.Repeat("x", 5000)), time.Now())
	if len(e.Message) > backend.MaxErrorMessage+len("…") || !strings.HasSuffix(e.Message, "…") {
		t.Errorf("message of %d bytes, want at most %d ending in …", len(e.Message), backend.MaxErrorMessage)
	}
}
