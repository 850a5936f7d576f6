package router

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
)

// nlbIPClass is a class of the AWS-like "nlb" backend whose default
// annotations ask for IP targets.
const nlbIPClass = "multicloud-ccm.io/nlb-ip"

// classRouter is metalRouter with the AWS-like "nlb" backend serving
// nlbIPClass, IP targets by the class's default annotation.
func classRouter(t *testing.T) (*Router, nlbCloud) {
	t.Helper()
	cfg, err := config.Parse(fmt.Appendf(nil, metalConfig, "error"), "")
	if err != nil {
		t.Fatal(err)
	}
	cfg.LoadBalancer.Classes = append(cfg.LoadBalancer.Classes,
		config.LoadBalancerClass{Name: nlbIPClass, Backend: "nlb", Annotations: map[string]string{nlbTargetType: "ip"}})
	reg, ok := backends.Lookup("baremetal")
	if !ok {
		t.Fatal("baremetal backend not compiled in")
	}
	metal, err := reg.New(context.Background(), backends.Options{Name: "metal", ClusterID: "test", Settings: cfg.Backends[0].Settings})
	if err != nil {
		t.Fatal(err)
	}
	nlb := nlbCloud{newLBCloud("nlb", "198.51.100.7")}
	r := mustRouter(t, cfg, Backend{Name: "metal", Type: "baremetal", Scheme: "baremetal", Cloud: metal},
		Backend{Name: "nlb", Type: "aws", Scheme: "aws", Cloud: nlb})
	return r, nlb
}

// TestAddressResyncServesOwnClassesWithDefaults: a Service of one of our
// classes whose class asks for IP targets (a default annotation) is
// re-targeted when an EC2 node's address changes, as the backend sees the
// Service with its class's defaults: an IP target, reached by address.
// Before, the node-address re-sync left out every classed Service; seen
// without the class's defaults, the node would be an instance target,
// which no address change moves.
func TestAddressResyncServesOwnClassesWithDefaults(t *testing.T) {
	r, nlb := classRouter(t)
	svc := newService("web", testutil.WithClass(nlbIPClass))
	node := newNode("ec2-1", withProviderID("aws:///eu-west-1a/i-1"), withInternalIP("10.0.0.1"))
	c := ensuredServices(t, r, []*corev1.Node{node}, svc)
	if got := nlb.targetsOf(svc); got != "ec2-1=10.0.0.1" {
		t.Fatalf("targets after the ensure %q", got)
	}
	c.setAddresses(t, node, internalIP("10.0.0.9"))
	eventually(t, "the classed load balancer re-targeted at the new address", func() bool {
		return nlb.targetsOf(svc) == "ec2-1=10.0.0.9"
	})
}
