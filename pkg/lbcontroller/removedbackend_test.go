package lbcontroller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
)

// TestRecreatedPastRemovedBackend (chaos seed 900): a Service served by
// metal and metal2 whose metal2 a reload removed, then deleted with its
// finalizer removed by hand and re-created under its name: the old one's
// cleanup deletes its load balancer in metal, warns once that metal2's is
// left (UnknownLoadBalancerBackend, naming metal2 and what to do), and the
// new Service is served. The cleanup failed on metal2 for ever, never
// reached metal, and the new Service was never served.
func TestRecreatedPastRemovedBackend(t *testing.T) {
	e := startEnv(t, envOptions{doc: metals(""), classless: true, versioned: true, reloadable: true})
	both := service("web", nil)
	both.Annotations = map[string]string{string(annotation.LoadBalancerBackend): "metal,metal2"}
	e.create(t, both)
	eventually(t, "both addresses", func() error {
		if s := e.get(t, "web"); len(s.Status.LoadBalancer.Ingress) != 2 || !e.ctrl.known("default/web") {
			return fmt.Errorf("%s", state(s))
		}
		return nil
	})
	old := e.get(t, "web")

	doc := metals("")
	e.reload(t, doc[:strings.Index(doc, "- name: metal2\n")])

	e.deleteByHand(t, "web")
	fresh := service("web", nil)
	fresh.UID = types.UID("uid-web-2")
	fresh.Annotations = map[string]string{string(annotation.LoadBalancerBackend): "metal"}
	e.create(t, fresh)

	eventually(t, "the new Service served, the old one's load balancer deleted", func() error {
		// held drops the UID once the router's delete succeeded.
		if held := e.cloud.held(); held[old.UID] {
			return fmt.Errorf("the old Service's load balancer is held: %v", held)
		}
		s := e.get(t, "web")
		if s.UID != fresh.UID || !inPrefix(ingress(s), "192.0.2.0/28") || !e.ctrl.known("default/web") {
			return fmt.Errorf("the new Service: %s", state(s))
		}
		return nil
	})
	eventually(t, "a Warning naming metal2 and the fix", func() error {
		for _, ev := range e.events(t, "web") {
			if strings.HasPrefix(ev, "UnknownLoadBalancerBackend: ") && strings.Contains(ev, `"metal2"`) &&
				strings.Contains(ev, "deleted without its load balancer's cleanup") && strings.Contains(ev, "by hand") {
				return nil
			}
		}
		return errors.New("no such Warning")
	})
}

// deleteByHand deletes the Service with its finalizer removed by hand, as
// an operator does: the controller may add the finalizer back between the
// two writes (it serves the Service until it sees the deletion), so the
// finalizer is removed again until the Service is gone.
func (e *env) deleteByHand(t *testing.T, name string) {
	t.Helper()
	services := e.client.CoreV1().Services("default")
	eventually(t, name+" deleted with its finalizer removed by hand", func() error {
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
