package router

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
)

// refusingUpdateCloud is an lbCloud whose UpdateLoadBalancer fails with a
// user error, as the OpenStack backend's does (parseOptions) for a Service
// whose OpenStack annotations no longer fit its new spec (proxy-protocol
// kept while a UDP port is added for the backend it moves to).
type refusingUpdateCloud struct{ *lbCloud }

func (c refusingUpdateCloud) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return c, true }

func (c refusingUpdateCloud) UpdateLoadBalancer(context.Context, string, *corev1.Service, []*corev1.Node) error {
	return backends.NewUserError("InvalidAnnotation", errors.New(`annotation loadbalancer.openstack.org/proxy-protocol="true": needs TCP ports, but port 53 is UDP`))
}

// TestReview54DrainingUpdateFailureHoldsBackTheMove (review probe of
// s54-osupdate, router level): a Service moves from a to b with a 20 s
// drain; a's UpdateLoadBalancer fails (the OpenStack backend's update of
// its draining load balancer, for an annotation invalid for a port it
// never serves: TestReview54UpdateIgnoresAnnotationsItDoesNotUse). The
// retargetDraining of each sync fails the whole sync: is b's address in the
// status during the drain, as with a draining backend that updates?
func TestReview54DrainingUpdateFailureHoldsBackTheMove(t *testing.T) {
	a := refusingUpdateCloud{newLBCloud("a", "198.51.100.1")}
	b := newLBCloud("b", "203.0.113.2")
	cfg := testConfig(func(c *config.CloudConfig) { c.LoadBalancer.DrainPeriod = &metav1.Duration{Duration: 20 * time.Second} })
	r := mustRouter(t, cfg, Backend{Name: "a", Type: "openstack", Scheme: "openstack", Cloud: a}, Backend{Name: "b", Type: "aws", Scheme: "aws", Cloud: b})
	c := startCluster(t, r, newService("web", withLBBackend("a")), newNode("n1", withInternalIP("10.0.0.1")))
	runServiceController(t, c)
	eventually(t, "a's address", func() bool { return ingressIPs(c.service(t, "web")) == "198.51.100.1" })
	c.edit(t, "web", func(s *corev1.Service) { s.Annotations[string(annotation.LoadBalancerBackend)] = "b" })
	deadline := time.Now().Add(8 * time.Second)
	for time.Now().Before(deadline) {
		if ingressIPs(c.service(t, "web")) == "203.0.113.2" || ingressIPs(c.service(t, "web")) == "198.51.100.1,203.0.113.2" {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	cur := c.service(t, "web")
	t.Errorf("8 s into a 20 s drain the status is %q, want b's address 203.0.113.2 in it: a draining backend's failing node update holds the move back; events: %v", ingressIPs(cur), c.events(t, "web"))
}
