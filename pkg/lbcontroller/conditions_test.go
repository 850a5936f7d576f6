package lbcontroller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
)

// conditionsOf prints the Service's conditions as type=status/reason,
// sorted.
func conditionsOf(s *corev1.Service) string {
	var out []string
	for _, c := range s.Status.Conditions {
		out = append(out, fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason))
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

// foreignCondition is another controller's condition on the Service.
var foreignCondition = metav1.Condition{Type: "example.com/Audited", Status: metav1.ConditionTrue, Reason: "Checked", Message: "someone else's",
	LastTransitionTime: metav1.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}

// TestServiceConditions (issue 45, part 4): a Service our controller serves
// carries LoadBalancerReady and, per backend of its record, whether that
// backend's load balancer serves or drains; a move with a drain shows both
// backends until the drain ends; another controller's condition is kept
// throughout, and a Service changed to ClusterIP loses ours only.
func TestServiceConditions(t *testing.T) {
	e := startEnv(t, envOptions{doc: metals(""), classless: true, versioned: true})
	s := service("web", nil)
	s.Annotations = map[string]string{string(annotation.LoadBalancerBackend): "metal", string(annotation.LoadBalancerDrain): "3s"}
	s.Status.Conditions = []metav1.Condition{foreignCondition}
	e.create(t, s)
	want := func(what, conds string) {
		t.Helper()
		eventually(t, what, func() error {
			if got := conditionsOf(e.get(t, "web")); got != conds {
				return fmt.Errorf("conditions %q, want %q", got, conds)
			}
			return nil
		})
	}
	want("served by metal", "LoadBalancerReady=True/Ensured backend.multicloud-ccm.io/metal=True/Serving example.com/Audited=True/Checked")
	ready := meta.FindStatusCondition(e.get(t, "web").Status.Conditions, ConditionReady)
	if ready.Message != "Load balancer ready in backend metal" || ready.ObservedGeneration != e.get(t, "web").Generation {
		t.Errorf("LoadBalancerReady: %+v", ready)
	}

	e.moveTo(t, "web", "metal2")
	want("metal draining, metal2 serving", "LoadBalancerReady=True/Ensured backend.multicloud-ccm.io/metal2=True/Serving backend.multicloud-ccm.io/metal=False/Draining example.com/Audited=True/Checked")
	drain := meta.FindStatusCondition(e.get(t, "web").Status.Conditions, ConditionBackendPrefix+"metal")
	if end := strings.TrimPrefix(drainingOf(e.get(t, "web")), "metal="); !strings.Contains(drain.Message, end) {
		t.Errorf("the draining condition %q does not say when the drain ends (%s)", drain.Message, end)
	}
	want("the drain over", "LoadBalancerReady=True/Ensured backend.multicloud-ccm.io/metal2=True/Serving example.com/Audited=True/Checked")

	err := retryUpdate(e, "web", func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeClusterIP; s.Spec.Ports[0].NodePort = 0 })
	if err != nil {
		t.Fatal(err)
	}
	want("ours removed, the foreign one kept", "example.com/Audited=True/Checked")
	if c := e.get(t, "web").Status.Conditions[0]; !c.LastTransitionTime.Equal(&foreignCondition.LastTransitionTime) || c.Message != foreignCondition.Message {
		t.Errorf("another controller's condition changed: %+v", c)
	}
}

// TestServiceConditionFailure: a failing ensure sets LoadBalancerReady
// False with the error, written once however often the sync is retried,
// and True again once it succeeds; the address already published stays.
func TestServiceConditionFailure(t *testing.T) {
	e := startEnv(t, envOptions{doc: metals(""), classless: true, versioned: true})
	webOn(t, e, "metal", "0s")
	e.cloud.set(errors.New("the cloud is down"))
	ensures := e.cloud.ensures.Load()
	writes := e.serviceWrites()
	e.edit(t, "web", map[string]*string{"example.com/touch": ptrTo("1")})
	eventually(t, "LoadBalancerReady False", func() error {
		c := meta.FindStatusCondition(e.get(t, "web").Status.Conditions, ConditionReady)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != "SyncLoadBalancerFailed" || !strings.Contains(c.Message, "the cloud is down") {
			return fmt.Errorf("%+v", c)
		}
		return nil
	})
	eventually(t, "retried", func() error {
		if n := e.cloud.ensures.Load() - ensures; n < 4 {
			return fmt.Errorf("%d ensures", n)
		}
		return nil
	})
	// The edit and one condition write: the retries write nothing.
	if n := e.serviceWrites() - writes; n != 2 {
		t.Errorf("%d writes to the Service while its sync failed, want 2 (the edit, the condition once)", n)
	}
	if len(e.get(t, "web").Status.LoadBalancer.Ingress) != 1 {
		t.Error("the failure cleared the published address")
	}
	e.cloud.set(nil)
	eventually(t, "LoadBalancerReady True again", func() error {
		if c := meta.FindStatusCondition(e.get(t, "web").Status.Conditions, ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("%+v", c)
		}
		return nil
	})
}

// retryUpdate changes the Service, retried on a conflict.
func retryUpdate(e *env, name string, change func(*corev1.Service)) error {
	for {
		s, err := e.client.CoreV1().Services("default").Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(s)
		_, err = e.client.CoreV1().Services("default").Update(context.Background(), s, metav1.UpdateOptions{})
		if err == nil || !apierrors.IsConflict(err) {
			return err
		}
	}
}

// TestServiceConditionsDroppedWhenNobodyServes: a reload that takes away
// the default backend of a classless Service without annotation leaves it
// to nobody: the router deletes its load balancer and clears its status,
// and the controller removes its conditions (another controller's kept).
func TestServiceConditionsDroppedWhenNobodyServes(t *testing.T) {
	e := startEnv(t, envOptions{doc: metals("  defaultBackend: metal\n"), classless: true, versioned: true, reloadable: true})
	s := service("web", nil)
	s.Status.Conditions = []metav1.Condition{foreignCondition}
	e.create(t, s)
	eventually(t, "served by the default", func() error {
		if got := conditionsOf(e.get(t, "web")); got != "LoadBalancerReady=True/Ensured backend.multicloud-ccm.io/metal=True/Serving example.com/Audited=True/Checked" {
			return fmt.Errorf("conditions %q", got)
		}
		return nil
	})
	e.reload(t, metals(""))
	eventually(t, "nobody serves it: no address, only the foreign condition", func() error {
		s := e.get(t, "web")
		if got := conditionsOf(s); len(s.Status.LoadBalancer.Ingress) != 0 || got != "example.com/Audited=True/Checked" {
			return fmt.Errorf("%s; conditions %q", state(s), got)
		}
		return nil
	})
}

// TestOthersLoadBalancerReadyKept: a condition of the same type another
// controller wrote (its own reason) is not ours: a Service we do not serve
// keeps it, and the controller writes nothing to it.
func TestOthersLoadBalancerReadyKept(t *testing.T) {
	e := startEnv(t, envOptions{doc: metals("  defaultBackend: metal\n"), classless: true, versioned: true})
	s := service("db", nil)
	s.Spec.Type = corev1.ServiceTypeClusterIP
	s.Spec.Ports[0].NodePort = 0
	theirs := metav1.Condition{Type: ConditionReady, Status: metav1.ConditionTrue, Reason: "Provisioned", Message: "another controller's",
		LastTransitionTime: metav1.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	s.Status.Conditions = []metav1.Condition{theirs}
	actions := len(e.client.Actions())
	e.create(t, s)
	// A Service the controller serves, created after it, shows the queue
	// went past the first.
	e.create(t, service("web", nil))
	eventually(t, "web served", addressed(e, t, "web"))
	if got := conditionsOf(e.get(t, "db")); got != "LoadBalancerReady=True/Provisioned" {
		t.Errorf("db's conditions %q, want another controller's LoadBalancerReady kept", got)
	}
	for _, a := range e.client.Actions()[actions:] {
		if p, ok := a.(interface{ GetName() string }); ok && a.GetVerb() == "patch" && a.GetResource().Resource == "services" && p.GetName() == "db" {
			t.Errorf("the controller patched db: %v", a)
		}
	}
}

// TestConditionsFollowARecordChangedOutsideASync: the router drops a
// drained backend from the record and the draining annotation in a write
// of its own (a drain's end, from its timer: router.finishDrain). That
// update is no reason to ensure, but the backend's condition must go with
// it: the controller rewrites the conditions in a full sync (chaos seed
// 1016: the condition stayed Draining after the drain ended).
func TestConditionsFollowARecordChangedOutsideASync(t *testing.T) {
	e := startEnv(t, envOptions{doc: metals(""), classless: true, versioned: true})
	webOn(t, e, "metal", "1h")
	e.moveTo(t, "web", "metal2")
	draining := "LoadBalancerReady=True/Ensured backend.multicloud-ccm.io/metal2=True/Serving backend.multicloud-ccm.io/metal=False/Draining"
	eventually(t, "metal draining", func() error {
		if got := conditionsOf(e.get(t, "web")); got != draining {
			return fmt.Errorf("conditions %q, want %q", got, draining)
		}
		return nil
	})

	// What the router's drain end writes, as another writer: metal leaves
	// the record and the drains.
	if err := retryUpdate(e, "web", func(s *corev1.Service) {
		s.Annotations[string(annotation.LoadBalancerBackends)] = "metal2"
		delete(s.Annotations, string(annotation.LoadBalancerDraining))
	}); err != nil {
		t.Fatal(err)
	}
	want := "LoadBalancerReady=True/Ensured backend.multicloud-ccm.io/metal2=True/Serving"
	eventually(t, "the drained backend's condition gone", func() error {
		if got := conditionsOf(e.get(t, "web")); got != want {
			return fmt.Errorf("conditions %q, want %q", got, want)
		}
		return nil
	})
}
