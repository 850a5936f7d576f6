package router

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
)

// refusingUpdateOctavia is the OpenStack-like octaviaCloud (members by
// InternalIP) whose UpdateLoadBalancer cannot reach its cloud (an error
// that is no user error: the re-sync retries it).
type refusingUpdateOctavia struct{ octaviaCloud }

func (c refusingUpdateOctavia) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return c, true }

func (c refusingUpdateOctavia) UpdateLoadBalancer(context.Context, string, *corev1.Service, []*corev1.Node) error {
	return errors.New("connection refused")
}

// TestProbe59bAddressResyncWarningNamesBackendOnce (review s59 of
// e46563c and 64eef66, where they meet the router's node-address
// re-sync): those commits made a backend's failed update, and the
// Warnings of a failed or draining backend, name the backend once, as
// the member's own error already says "backend octavia:
// UpdateLoadBalancer: ...". The address re-sync (process.AddressResync,
// sync) still puts the member's error after its own "in backend
// octavia": what a user sees, in the LoadBalancerNodeResyncFailed
// Warning on the Service after any node's address change while the
// cloud is unreachable (one per retry), is "Cannot update the load
// balancer's targets in backend octavia after a node address change:
// backend octavia: UpdateLoadBalancer: connection refused", the backend
// named twice, the very wording the two commits removed elsewhere.
// Deterministic: the re-sync's Warning is written on every failed retry.
func TestProbe59bAddressResyncWarningNamesBackendOnce(t *testing.T) {
	oct := refusingUpdateOctavia{octaviaCloud{newLBCloud("octavia", "203.0.113.9")}}
	r := metalRouter(t, "error", Backend{Name: "octavia", Type: "openstack", Scheme: "openstack", Cloud: oct})
	n1 := newNode("ec2-1", withProviderID("aws:///eu-west-1a/i-1"), withInternalIP("10.0.0.1"))
	n2 := newNode("ec2-2", withProviderID("aws:///eu-west-1a/i-2"), withInternalIP("10.0.0.2"))
	svc := newService("os-web", withLBBackend("octavia"))
	c := ensuredServices(t, r, []*corev1.Node{n1, n2}, svc)
	c.setAddresses(t, n2, internalIP("10.0.0.22"))

	var msgs []string
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		msgs = msgs[:0]
		for _, e := range c.eventsOn(t, "os-web") {
			if e.Reason == "LoadBalancerNodeResyncFailed" {
				msgs = append(msgs, e.Message)
			}
		}
		if len(msgs) > 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(msgs) == 0 {
		t.Fatalf("no LoadBalancerNodeResyncFailed Warning after the address change (the re-sync did not fail?): events %v", c.events(t, "os-web"))
	}
	for _, m := range msgs {
		if !strings.Contains(m, "connection refused") {
			t.Fatalf("the re-sync failed otherwise: %q", m)
		}
		if n := strings.Count(m, "backend octavia"); n != 1 {
			t.Errorf("the address re-sync's Warning names backend octavia %d times, want once: %q", n, m)
		}
	}
}
