package router

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/backends"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/config"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/lifecycle"
)

func withClass(name, backend string) func(*config.CloudConfig) {
	return func(c *config.CloudConfig) {
		c.LoadBalancer.Classes = append(c.LoadBalancer.Classes, config.LoadBalancerClass{Name: name, Backend: backend})
	}
}

func classed(class string) func(*corev1.Service) {
	return func(s *corev1.Service) { s.Spec.LoadBalancerClass = &class }
}

// TestClassRouting: a Service of one of our classes goes to the class's
// backend whatever the default; a foreign class goes nowhere, without a
// cloud call; a classless Service follows the annotation and default; an
// annotation contradicting the class is refused with its own reason.
func TestClassRouting(t *testing.T) {
	tweaks := []func(*config.CloudConfig){withDefault("a"), withClass("multicloud-ccm.io/b", "b")}
	tests := []struct {
		name     string
		svc      *corev1.Service
		wantIP   string
		wantErr  string
		elsewher bool
	}{
		{name: "our class picks its backend over the default", svc: newService("s", classed("multicloud-ccm.io/b")), wantIP: "198.51.100.1"},
		{name: "our class and an agreeing annotation", svc: newService("s", classed("multicloud-ccm.io/b"), withLBBackend("b")), wantIP: "198.51.100.1"},
		{name: "a foreign class is never served", svc: newService("s", classed("metallb.io/metallb")), elsewher: true},
		{name: "classless follows the default", svc: newService("s"), wantIP: "192.0.2.1"},
		{name: "classless follows the annotation", svc: newService("s", withLBBackend("b")), wantIP: "198.51.100.1"},
		{name: "class and annotation in conflict", svc: newService("s", classed("multicloud-ccm.io/b"), withLBBackend("a")),
			wantErr: `spec.loadBalancerClass "multicloud-ccm.io/b" is served by backend "b" but annotation multicloud-ccm.io/load-balancer-backend="a" names another`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, a, b := twoClouds(t, tweaks...)
			status, err := r.EnsureLoadBalancer(context.Background(), cluster, tt.svc, nil)
			if tt.elsewher {
				if err != cloudprovider.ImplementedElsewhere { //nolint:errorlint // upstream compares with ==.
					t.Fatalf("err = %v, want ImplementedElsewhere", err)
				}
				if a.gets+b.gets != 0 || a.heldCount()+b.heldCount() != 0 {
					t.Errorf("a foreign class cost %d cloud calls and %d load balancers", a.gets+b.gets, a.heldCount()+b.heldCount())
				}
				return
			}
			checkErr(t, err, tt.wantErr)
			if err != nil {
				if ue, ok := backends.AsUserError(err); !ok || ue.Reason != lifecycle.ReasonClassConflict {
					t.Errorf("error %v is not a UserError with reason %s", err, lifecycle.ReasonClassConflict)
				}
				if a.heldCount()+b.heldCount() != 0 {
					t.Error("a class conflict created a load balancer")
				}
				return
			}
			if status.Ingress[0].IP != tt.wantIP {
				t.Errorf("IP = %s, want %s", status.Ingress[0].IP, tt.wantIP)
			}
		})
	}
}

func TestServesClass(t *testing.T) {
	r, _, _ := twoClouds(t, withClass("multicloud-ccm.io/b", "b"))
	if !r.ServesClass("multicloud-ccm.io/b") || r.ServesClass("metallb.io/metallb") || !r.HasClasses() {
		t.Error("ServesClass/HasClasses disagree with the config")
	}
}

// TestClassBackendWithoutLoadBalancers: New refuses a class whose backend
// has no load balancers, naming the field.
func TestClassBackendWithoutLoadBalancers(t *testing.T) {
	cfg := testConfig(withClass("multicloud-ccm.io/x", "inst"))
	_, err := New(cfg, []Backend{lbBackend("a", "baremetal", newLBCloud("a", "192.0.2.1")), {Name: "inst", Type: "test", Scheme: "x", Cloud: instanceCloud(true, nil)}})
	if err == nil || !strings.Contains(err.Error(), `loadBalancer.classes[0].backend: Invalid value: "inst": backend "inst" has no load balancers: its type offers none; or name a backend that has them ([a])`) {
		t.Fatalf("New = %v, want the class refused", err)
	}
}
