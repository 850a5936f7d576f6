package router

import (
	"context"
	"strings"
	"testing"
)

// TestBackendErrorNamedOnce: a backend's failed EnsureLoadBalancer and
// UpdateLoadBalancer come back naming the backend once ("backend a:
// EnsureLoadBalancer: a: connection refused"), not once per layer.
func TestBackendErrorNamedOnce(t *testing.T) {
	r, a, _ := drainClouds(t, 0)
	svc := newService("web", withLBBackend("a,b"))
	if _, err := r.EnsureLoadBalancer(context.Background(), cluster, svc, nil); err != nil {
		t.Fatal(err)
	}
	a.setDown(true)
	_, err := r.EnsureLoadBalancer(context.Background(), cluster, svc, nil)
	if err == nil || strings.Count(err.Error(), "backend a:") != 1 {
		t.Errorf("EnsureLoadBalancer with a down: %v, want an error naming backend a once", err)
	}
	err = r.UpdateLoadBalancer(context.Background(), cluster, svc, nil)
	if err == nil || strings.Count(err.Error(), "backend a:") != 1 {
		t.Errorf("UpdateLoadBalancer with a down: %v, want an error naming backend a once", err)
	}
}
