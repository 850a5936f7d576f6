package router

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
)

// TestReview71ChurnAheadOfTheInformerKeepsNoState: Services created,
// ensured and deleted in bursts that the Services informer has not yet
// seen (a busy API server's watch lags its writes; the CCM's informer
// sees each burst after it was written) leave the router no per-Service
// state once the informer caught up, and no load balancer.
//
// TestServiceChurnKeepsNoState now writes each Service only once the
// informer has seen the one before (informerPace, commit 5532073), so
// it no longer has the router's Forget (driven by the informer's delete
// events) run behind the writes. This keeps that case covered within the
// fake's watch buffer (100 events): each burst is 20 Services, and the
// next burst waits for the informer to have seen the previous one.
func TestReview71ChurnAheadOfTheInformerKeepsNoState(t *testing.T) {
	r, a, _ := twoClouds(t)
	c := startCluster(t, r)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seen := informerPace(t, c.factory.Core().V1().Services().Informer())
	c.factory.Start(ctx.Done())
	c.factory.WaitForCacheSync(ctx.Done())
	services := c.client.CoreV1().Services("default")
	const bursts, per = 50, 20
	created, deleted := 0, 0
	for b := range bursts {
		seen(created, deleted)
		var burst []string
		for i := range per {
			var tweaks []testutil.ServiceTweak
			if i%5 == 0 {
				tweaks = append(tweaks, withLBBackend("a"))
			}
			svc, err := services.Create(ctx, newService(fmt.Sprintf("burst-%03d-%02d", b, i), tweaks...), metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			created++
			if _, err := r.EnsureLoadBalancer(ctx, cluster, svc, nil); err != nil && err != cloudprovider.ImplementedElsewhere { //nolint:errorlint // upstream compares with ==.
				t.Fatal(err)
			}
			burst = append(burst, svc.Name)
		}
		for _, n := range burst {
			deleteService(t, r, c, n)
			deleted++
		}
	}
	seen(created, deleted)
	eventually(t, "no per-Service state left", func() bool { return serviceState(r) == 0 })
	if a.heldCount() != 0 {
		t.Errorf("%d load balancers left", a.heldCount())
	}
}
