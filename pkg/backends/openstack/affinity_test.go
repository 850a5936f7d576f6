package openstack

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestSessionAffinityPersistence: on the real Octavia, sessionAffinity:
// ClientIP gives the pools SOURCE_IP session persistence (as
// cloud-provider-openstack does), and None removes it, in place.
func TestSessionAffinityPersistence(t *testing.T) {
	t.Parallel()
	s := realOctavia(t)
	c := newRealCloud(t, s, "t"+randomID(t))
	nodes := []*corev1.Node{newNode("n1", withInternalIP("10.28.0.1"))}
	svc := newService("affinity", func(s *corev1.Service) { s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP })
	t.Cleanup(func() { deleteConverged(t, c.lb, svc) })
	persistence := func() (string, string) {
		t.Helper()
		lb := theLB(t, c, svc)
		sc, err := c.lb.clients(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		st, err := readState(context.Background(), sc.loadBalancer, lb.ID)
		if err != nil || len(st.pools) != 1 {
			t.Fatalf("pools %v, %v: want one", st, err)
		}
		for _, p := range st.pools {
			return lb.ID, p.pool.Persistence.Type
		}
		return "", ""
	}
	ensureConverged(t, c.lb, svc, nodes)
	id, got := persistence()
	if got != persistenceSourceIP {
		t.Errorf("sessionAffinity ClientIP: persistence %q, want SOURCE_IP", got)
	}
	svc.Spec.SessionAffinity = corev1.ServiceAffinityNone
	ensureConverged(t, c.lb, svc, nodes)
	if id2, got := persistence(); got != "" || id2 != id {
		t.Errorf("sessionAffinity None: persistence %q on load balancer %s, want none on %s", got, id2, id)
	}
}
