package aws

import (
	"context"
	"errors"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/component-base/metrics/testutil"

	itestutil "github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/cloudapi"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/backend"
)

// TestFencedMutationsLeaveHealthAlone: a replica whose mutation gate is
// closed (it lost its leader-election lease) has every Ensure refused
// before anything is sent; the refusals say nothing about the cloud, so
// the backend's health (the router's count of calls in a row that failed
// to reach the cloud, and its up gauge) stays as it was, however many
// there are. Not parallel: the gate is the process's.
func TestFencedMutationsLeaveHealthAlone(t *testing.T) {
	e := newEnv(t)
	in := e.addInstance(1)
	nodes := []*corev1.Node{newNode(in.PrivateDNSName, itestutil.WithProviderID(fmt.Sprintf("aws:///%s/%s", in.Zone, in.ID)), itestutil.WithInternalIP(in.PrivateIPs[0]))}
	name := "fenced-" + t.Name()
	m := backend.New(backend.Backend{Name: name, Type: Type, Scheme: "aws", Cloud: e.cloud})
	old := cloudapi.SetMutationGate(func(context.Context) error { return errors.New("deposed") })
	t.Cleanup(func() { cloudapi.SetMutationGate(old) })
	ctx := context.Background()
	for i := range backend.UnreachableAfter + 1 {
		_, err := m.EnsureLoadBalancer(ctx, "kubernetes", newService(fmt.Sprintf("web-%d", i)), nodes)
		if !errors.Is(err, cloudapi.ErrMutationRefused) {
			t.Fatalf("Ensure %d with the gate closed: %v, want ErrMutationRefused", i, err)
		}
	}
	if p := m.Health.Problem(); p != "" {
		t.Errorf("after %d refused Ensures the backend counts as unreachable: %s", backend.UnreachableAfter+1, p)
	}
	if up, err := testutil.GetGaugeMetricValue(backend.BackendUp.WithLabelValues(name)); err != nil || up != 1 {
		t.Errorf("backend_up = %v (%v), want 1", up, err)
	}
	if n := e.fake.MutatingRequests(); len(n) != 0 {
		t.Errorf("the refused Ensures sent mutating requests: %v", n)
	}
}
