package lbcontroller

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
)

// TestReplacedWhileFinalizerAdded (chaos seed 900, and
// TestRecreatedPastRemovedBackend's flake in CI): the controller adds the
// finalizer back to a Service whose finalizer was removed by hand; the
// Service is deleted and re-created under its name before the patch lands,
// so the patch conflicts. The re-read by name finds the new Service: the
// controller must not take it for the one it was syncing (it patched the
// new one, tracked it in place of the old one, and the old one's load
// balancer was never deleted). It ends the sync; the re-creation's own
// sync deletes the old load balancer and serves the new Service.
func TestReplacedWhileFinalizerAdded(t *testing.T) {
	var armed atomic.Bool
	metal := map[string]string{string(annotation.LoadBalancerBackend): "metal"}
	fresh := service("web", nil)
	fresh.Annotations = metal
	fresh.UID = types.UID("uid-web-2")
	fresh.ResourceVersion = "900000"
	e := startEnv(t, envOptions{doc: metals(""), classless: true, versioned: true, reactors: func(c *fake.Clientset) {
		c.PrependReactor("patch", "services", func(a clienttesting.Action) (bool, runtime.Object, error) {
			p := a.(clienttesting.PatchAction)
			if p.GetName() != "web" || !strings.Contains(string(p.GetPatch()), "finalizers") || !armed.CompareAndSwap(true, false) {
				return false, nil, nil
			}
			// Deleted (no finalizer: at once) and re-created, then the
			// patch, guarded by the old resourceVersion, conflicts.
			gvr := corev1.SchemeGroupVersion.WithResource("services")
			if err := c.Tracker().Delete(gvr, "default", "web"); err != nil {
				return true, nil, err
			}
			if err := c.Tracker().Create(gvr, fresh.DeepCopy(), "default"); err != nil {
				return true, nil, err
			}
			return true, nil, apierrors.NewConflict(gvr.GroupResource(), "web", errOutdated)
		})
	}})
	svc := service("web", nil)
	svc.Annotations = maps.Clone(metal)
	e.create(t, svc)
	eventually(t, "served", func() error {
		if s := e.get(t, "web"); !inPrefix(ingress(s), "192.0.2.0/28") || !e.ctrl.known("default/web") {
			return fmt.Errorf("%s", state(s))
		}
		return nil
	})
	old := e.get(t, "web")
	armed.Store(true)
	old.Finalizers = nil
	if _, err := e.client.CoreV1().Services("default").Update(context.Background(), old, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the new Service served, the old one's load balancer deleted", func() error {
		if armed.Load() {
			return fmt.Errorf("the finalizer was not added back yet")
		}
		if held := e.cloud.held(); held[old.UID] {
			return fmt.Errorf("the old Service's load balancer is held: %v", held)
		}
		s := e.get(t, "web")
		if s.UID != fresh.UID || !inPrefix(ingress(s), "192.0.2.0/28") || !e.ctrl.known("default/web") {
			return fmt.Errorf("the new Service: %s", state(s))
		}
		return nil
	})
}
