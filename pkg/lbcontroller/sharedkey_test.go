package lbcontroller

import (
	"fmt"
	"testing"
	"time"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
)

// TestRequesterLosingSharedKeyLosesAddress (a chaos seed: "a requester
// that lost its shared-IP key keeps the address in its status"): a and b
// share metal's 192.0.2.5 by the allow-shared-ip key k, b requesting it.
// b's key removed, or changed, it may no longer share the address a
// holds: bare metal refuses it (LoadBalancerIPInUse), and b must stop
// showing 192.0.2.5 (the speaker announces what the status shows), as
// MetalLB clears the address of a Service whose sharing the config no
// longer allows; a keeps it. Before, the failed sync left b's status as
// it was: the failed backend's addresses stay shown, as those of a cloud
// that may be down, whose load balancer may still serve.
func TestRequesterLosingSharedKeyLosesAddress(t *testing.T) {
	for _, tc := range []struct {
		name string
		key  *string
	}{{"key removed", nil}, {"key changed", ptrTo("other")}} {
		t.Run(tc.name, func(t *testing.T) {
			e := startEnv(t, envOptions{doc: metals(""), classless: true, versioned: true})
			a := service("a", nil)
			a.Annotations = map[string]string{string(annotation.LoadBalancerBackend): "metal",
				string(annotation.AllowSharedIP): "k", string(annotation.LoadBalancerIPs): "192.0.2.5"}
			e.create(t, a)
			eventually(t, "a addressed", addressed(e, t, "a"))
			b := service("b", nil)
			b.Spec.Ports[0].Port = 8080
			b.Annotations = map[string]string{string(annotation.LoadBalancerBackend): "metal",
				string(annotation.AllowSharedIP): "k", string(annotation.LoadBalancerIPs): "192.0.2.5"}
			e.create(t, b)
			eventually(t, "b addressed", addressed(e, t, "b"))
			if ingress(e.get(t, "b")) != "192.0.2.5" || ingress(e.get(t, "a")) != "192.0.2.5" {
				t.Fatalf("not shared: a %s b %s", state(e.get(t, "a")), state(e.get(t, "b")))
			}

			e.edit(t, "b", map[string]*string{string(annotation.AllowSharedIP): tc.key})
			eventually(t, "b refused the address", func() error {
				if hasEvent(e.events(t, "b"), "LoadBalancerIPInUse") == "" {
					return fmt.Errorf("events %v", e.events(t, "b"))
				}
				return nil
			})
			eventually(t, "b no longer showing 192.0.2.5", func() error {
				if got := ingresses(e.get(t, "b")); got != "" {
					return fmt.Errorf("b's status %q; events %v", got, e.events(t, "b"))
				}
				return nil
			})
			time.Sleep(300 * time.Millisecond) // a state that must last: no condition to wait for
			if got := ingresses(e.get(t, "b")); got != "" {
				t.Errorf("b's status %q once refused, want none", got)
			}
			if got := ingresses(e.get(t, "a")); got != "192.0.2.5" {
				t.Errorf("a's status %q, want 192.0.2.5 kept", got)
			}
		})
	}
}
