package lbcontroller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestRemovedClassServiceDeletedByHand (chaos seed 631642364): a Service
// of a class served by AWS, whose class a reload then removed from the
// config, has its cleanup finalizer removed by hand (the controller syncs
// that edit) and is deleted, then re-created classless under its name.
// docs/routing.md: a class removed from the config leaves its Services'
// load balancers alone, but a Service of that class being deleted is still
// cleaned up: its NLB is deleted. The sync of the finalizer edit forgot
// the Service (not served any more), so its deletion found nothing to
// delete, and the NLB was left, tagged for a Service nobody has.
func TestRemovedClassServiceDeletedByHand(t *testing.T) {
	running, vpcID := runAWSFake(t)
	doc := fmt.Sprintf(awsConfig, running.URL, vpcID)
	e := startEnv(t, envOptions{doc: doc, reloadable: true, versioned: true,
		wrap: func(h *hookedCloud) Cloud { return routerTargets{h} }})

	e.create(t, service("web", ptrTo(awsIPClass)))
	eventually(t, "web's NLB and its conditions", func() error {
		s := e.get(t, "web")
		if s.Status.LoadBalancer.Ingress == nil || len(s.Status.Conditions) == 0 || !e.ctrl.known("default/web") {
			return fmt.Errorf("%s, conditions %v", state(s), s.Status.Conditions)
		}
		if n := len(running.LoadBalancers()); n != 1 {
			return fmt.Errorf("%d NLBs", n)
		}
		return nil
	})
	old := e.get(t, "web")

	classLine := "  - {name: " + awsIPClass
	i := strings.Index(doc, classLine)
	j := i + strings.Index(doc[i:], "\n") + 1
	e.reload(t, strings.Replace(doc[:i]+doc[j:], "  classes:\n", "  classes: []\n", 1))

	// The finalizer removed by hand: the controller syncs the edit of a
	// Service it no longer serves, and drops its conditions.
	old.Finalizers = nil
	if _, err := e.client.CoreV1().Services("default").Update(context.Background(), old, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the finalizer edit synced (web's conditions dropped)", func() error {
		if s := e.get(t, "web"); len(s.Status.Conditions) > 0 || len(s.Finalizers) > 0 {
			return fmt.Errorf("finalizers %v, conditions %v", s.Finalizers, s.Status.Conditions)
		}
		return nil
	})
	if n := len(running.LoadBalancers()); n != 1 {
		t.Fatalf("removing the class and the finalizer changed the NLBs: %d", n)
	}

	if err := e.client.CoreV1().Services("default").Delete(context.Background(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	fresh := service("web", nil)
	fresh.UID = types.UID("uid-web-2")
	e.create(t, fresh)

	eventually(t, "the deleted Service's NLB deleted", func() error {
		if lbs := running.LoadBalancers(); len(lbs) > 0 {
			return fmt.Errorf("NLBs left: %s", lbs[0].Name)
		}
		if e.cloud.held()[old.UID] {
			return errors.New("the old Service's load balancer is held")
		}
		return nil
	})
}
