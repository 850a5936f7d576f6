package router

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/router/lifecycle"
)

// TestUpstreamCleansUpGoneServicePastRemovedBackend (the upstream side of
// lbcontroller's TestRecreatedPastRemovedBackend, ServiceGone): web is
// served by a and b; a reload removes b, and web, moved to a, keeps b in
// its record (b's load balancer cannot be reached). Then web is deleted
// with its finalizer removed by hand, and either re-created under its name
// or deleted while upstream's service controller syncs it, a sync that
// then fails (upstream has no handler for deletions: it learns of one when
// its queue hands it a key the lister no longer has, such as a retry). Upstream's controller then asks the
// router to delete the load balancer of its last copy of web, which is
// gone: the router sees that and deletes it in a, warning that b's is
// left (b is not configured, and nobody can edit the record of a Service
// that is gone), as pkg/lbcontroller's ServiceGone does. Before, the
// record's unconfigured b failed every delete: a's load balancer leaked,
// and a re-created web was never served (upstream deletes the old one's
// load balancer first).
func TestUpstreamCleansUpGoneServicePastRemovedBackend(t *testing.T) {
	for _, recreate := range []bool{false, true} {
		t.Run(fmt.Sprintf("recreated=%v", recreate), func(t *testing.T) {
			ca, cb := t.Name()+"/a", t.Name()+"/b"
			a, b := heldCloudState(ca, "198.51.100.1"), heldCloudState(cb, "198.51.100.2")
			a.reset()
			b.reset()
			bs := []heldBackend{{"a", ca, "198.51.100.1"}, {"b", cb, "198.51.100.2"}}
			c := startReloadCluster(t, heldConfig(t, "", bs...), newService("web", withLBBackend("a,b")))
			c.runServiceController(t)
			eventually(t, "web on a and b", func() bool { return ingressIPs(c.service(t, "web")) == "198.51.100.1,198.51.100.2" })
			old := c.service(t, "web")

			c.apply(t, heldConfig(t, "", bs[0]))
			c.edit(t, "web", func(s *corev1.Service) { s.Annotations[string(annotation.LoadBalancerBackend)] = "a" })
			eventually(t, "web on a alone, b kept in the record", func() bool {
				s := c.service(t, "web")
				return ingressIPs(s) == "198.51.100.1" && s.Annotations[string(annotation.LoadBalancerBackends)] == "a,b"
			})
			if recreate {
				c.deleteByHand(t, "web")
				c.createService(t, newService("web", withLBBackend("a"), func(s *corev1.Service) { s.UID = "uid-web-2" }))
			} else {
				a.hold("ensure")
				c.userPatch(t, "web", map[string]string{"example.com/owner": "team-blue"}, nil)
				a.awaitHeld(t, "ensure", 30*time.Second)
				c.deleteByHand(t, "web")
				a.setFail(nil, errHeldDown) // the sync fails: upstream retries it, and finds web gone
				a.releaseOne()
			}
			testutil.Eventually(t, 30*time.Second, "the gone Service's load balancer deleted in a", func() error {
				if a.has(old) {
					return errors.New("a holds it")
				}
				return nil
			})
			if recreate {
				eventually(t, "the new web served by a", func() bool {
					s := c.service(t, "web")
					return s.UID == "uid-web-2" && ingressIPs(s) == "198.51.100.1" && a.has(s)
				})
			} else if !c.serviceGone(t, "web") {
				t.Error("web is still there")
			}
			testutil.Eventually(t, 30*time.Second, "a Warning naming b and what to do", func() error {
				for _, e := range c.eventsOn(t, "web") {
					if e.Reason == lifecycle.ReasonUnknownLBBackend && strings.Contains(e.Message, `"b"`) &&
						strings.Contains(e.Message, "deleted without its load balancer's cleanup") {
						return nil
					}
				}
				return fmt.Errorf("events %v", c.events(t, "web"))
			})
			if !b.has(old) {
				t.Error("b's load balancer is gone, though b is not configured")
			}
		})
	}
}

// deleteByHand deletes the Service with its finalizer removed by hand, as
// an operator does: the controller may add its finalizer back between the
// two writes, so it is removed again until the Service is gone.
func (c *fakeCluster) deleteByHand(t *testing.T, name string) {
	t.Helper()
	services := c.client.CoreV1().Services("default")
	testutil.Eventually(t, 30*time.Second, name+" deleted with its finalizer removed by hand", func() error {
		s, err := services.Get(context.Background(), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if len(s.Finalizers) > 0 {
			s.Finalizers = nil
			if _, err := services.Update(context.Background(), s, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
		if err := services.Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		return errors.New("still there")
	})
}

// userPatch merges annotations and labels into the Service, as
// `kubectl annotate` and `kubectl label` do.
func (c *fakeCluster) userPatch(t *testing.T, name string, annotations, labels map[string]string) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":%s,"labels":%s}}`, jsonMap(annotations), jsonMap(labels))
	if _, err := c.client.CoreV1().Services("default").Patch(context.Background(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

func jsonMap(m map[string]string) string {
	var parts []string
	for k, v := range m {
		parts = append(parts, fmt.Sprintf("%q:%q", k, v))
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// awaitHeld waits for a held call of op to arrive, or fails the test.
func (s *heldState) awaitHeld(t *testing.T, op string, within time.Duration) {
	t.Helper()
	select {
	case got := <-s.entered:
		if got != op {
			t.Fatalf("held call %s arrived, want %s", got, op)
		}
	case <-time.After(within):
		t.Fatalf("no %s call within %v", op, within)
	}
}
