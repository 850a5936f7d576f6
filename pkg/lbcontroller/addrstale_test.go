package lbcontroller

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	utilt "github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
)

// TestAddressChangeOfAnUntargetedNodeUpdatesNothing (review probe s57 of
// 5344a28): while a Service's first ensure is in flight, the address of
// a node its load balancer does not target changes (a node with only an
// ExternalIP: the counttest backend takes only nodes with an InternalIP,
// as Octavia does). No load balancer of the Service holds that node, so
// nothing about the Service's load balancer is stale; the router's own
// address re-sync, which asks each backend (RetargetsOn), queues nothing.
// The controller's addrGen counted the change of any included node,
// marked the Service stale, and its next sync called UpdateLoadBalancer
// with the same targets: one needless cloud update per Service whose
// call was in flight during any node's address change (at scale: every
// Service being created during a rolling node re-addressing). Now only a
// Service whose load balancers the call handed the re-addressed node is
// marked (requeueIfNodesChanged: targetLists.readdressed).
func TestAddressChangeOfAnUntargetedNodeUpdatesNothing(t *testing.T) {
	registerCountType()
	objs := append(countNodeObjects(),
		k8sruntime.Object(utilt.NewNode("ext-only", utilt.WithProviderID(countType+"://ext-only"),
			utilt.WithAddress(corev1.NodeExternalIP, "198.51.100.7"))))
	e := startEnv(t, envOptions{doc: countConfig("0s"), classless: true, versioned: true,
		nodeQuiet: 10 * time.Millisecond, nodeMax: 50 * time.Millisecond,
		wrap: func(h *hookedCloud) Cloud { return routerTargets{h} }}, objs...)
	want := uint64(len(countNodes) + 2)
	waitFor(t, 30*time.Second, "every node's add counted", func() error {
		if got := e.ctrl.nodeGen.Load(); got != want {
			return fmt.Errorf("%d node changes counted, want %d", got, want)
		}
		return nil
	})
	readdressDuringEnsure(t, e, "ext-only", corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "198.51.100.8"})
	e.create(t, utilt.NewService("web"))
	waitFor(t, 30*time.Second, "web served by counta", synced(e, t, "web", 1))
	staleMarkTaken(t, e, "default/web")
	if n := e.cloud.updates.Load(); n != 0 {
		t.Errorf("%d UpdateLoadBalancer calls for a Service none of whose load balancers targets the node whose address changed (targets unchanged: %v)", n, e.ctrl.stateOf("default/web").nodes)
	}
}

// readdressDuringEnsure gives the node the one address addr inside the
// next EnsureLoadBalancer, and returns from there once the controller
// counted the address change.
func readdressDuringEnsure(t *testing.T, e *env, node string, addr corev1.NodeAddress) {
	t.Helper()
	nodes := e.client.CoreV1().Nodes()
	e.cloud.mu.Lock()
	defer e.cloud.mu.Unlock()
	e.cloud.during = func(*corev1.Service) {
		n, err := nodes.Get(context.Background(), node, metav1.GetOptions{})
		if err != nil {
			t.Error(err)
			return
		}
		n.Status.Addresses = []corev1.NodeAddress{addr}
		before := e.ctrl.addrGen.Load()
		if _, err := nodes.UpdateStatus(context.Background(), n, metav1.UpdateOptions{}); err != nil {
			t.Error(err)
			return
		}
		deadline := time.Now().Add(10 * time.Second)
		for e.ctrl.addrGen.Load() == before && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// staleMarkTaken waits until the Service's stale mark, if any, was taken,
// then lets the sync it (or anything else) queued run.
func staleMarkTaken(t *testing.T, e *env, key string) {
	t.Helper()
	waitFor(t, 10*time.Second, "the stale mark taken", func() error {
		e.ctrl.mu.Lock()
		defer e.ctrl.mu.Unlock()
		if e.ctrl.addrStale[key] {
			return fmt.Errorf("still marked")
		}
		return nil
	})
	time.Sleep(500 * time.Millisecond)
}
