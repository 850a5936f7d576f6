package plan_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/plan"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router"
)

type wrapIECloud struct{ cloudprovider.Interface }

func (c wrapIECloud) LoadBalancer() (cloudprovider.LoadBalancer, bool) {
	lb, ok := c.Interface.LoadBalancer()
	return wrapIELB{LoadBalancer: lb, NodeTargeter: lb.(backends.NodeTargeter)}, ok
}

type wrapIELB struct {
	cloudprovider.LoadBalancer
	backends.NodeTargeter
}

func (l wrapIELB) UpdateLoadBalancer(ctx context.Context, cn string, svc *corev1.Service, nodes []*corev1.Node) error {
	err := l.LoadBalancer.UpdateLoadBalancer(ctx, cn, svc, nodes)
	if err == cloudprovider.ImplementedElsewhere { //nolint:errorlint // probe
		return fmt.Errorf("wrapped: %w", err)
	}
	return err
}

// P6: the aws backend answers the kept NLB's update with a wrapped
// ImplementedElsewhere: the router (==) counts it an error, and so must
// the plan (it counted it left with errors.Is, showing no error where the
// switch records one).
func TestReview67bWrappedImplementedElsewhere(t *testing.T) {
	w := newWorld(t)
	s := keptWhileRefused(t, w, map[string]string{"service.beta.kubernetes.io/aws-load-balancer-type": "external"})
	var bs []router.Backend
	for _, bc := range w.cfg.Backends {
		reg, _ := backends.Lookup(bc.Type)
		cloud, err := reg.New(t.Context(), backends.Options{Name: bc.Name, ClusterID: w.cfg.ClusterID, Settings: bc.Settings})
		if err != nil {
			t.Fatal(err)
		}
		if bc.Type == "aws" {
			cloud = wrapIECloud{cloud}
		}
		bs = append(bs, router.Backend{Name: bc.Name, Type: bc.Type, Scheme: reg.Scheme, Cloud: cloud})
	}
	rep, err := plan.Run(t.Context(), plan.Options{Config: w.cfg, Client: newReadOnly(w.objects(s)...), Backends: bs})
	if err != nil {
		t.Fatal(err)
	}
	sp := rep.Services[0]
	t.Logf("json: %s", dump(t, sp))
	// What the router says of the same update.
	r, err := router.NewFromConfig(context.Background(), w.cfg)
	if err != nil {
		t.Fatal(err)
	}
	_ = r
	// The router compares the sentinel with == (backends return it
	// unwrapped, as upstream compares it): a wrapped one is an error of
	// the update, which the plan shows as the switch records it. A kept
	// backend whose update fails is predicted its targets, as a retry
	// that succeeds gives them (what the plan cannot know).
	if !strings.Contains(sp.Error, "kept meanwhile") {
		t.Errorf("plan shows no error of the kept NLB's update; the router (== ImplementedElsewhere) would return %q as an error and record it on the Service", "wrapped: "+cloudprovider.ImplementedElsewhere.Error())
	}
}
