package lbcontroller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/multicloud-ccm/multicloud-ccm/internal/awsfake"
	utilt "github.com/multicloud-ccm/multicloud-ccm/internal/testutil"
	"github.com/multicloud-ccm/multicloud-ccm/pkg/annotation"
)

// TestGoneMidMoveDeletesWhatTheMoveCreated (TestReloadTorture, CI of
// session 62: "d-1: served by metal, but 1 NLBs left"): a Service served
// by metal moves to aws; the sync writes aws into the record with its
// finalizer (prepare), creates the NLB and fails before it is done. The
// controller keeps the copy it last served (record: metal) until an ensure
// succeeds. The Service is then deleted by hand and re-created under its
// name: the old one's cleanup must reach every backend the record names
// as written, aws included, or its NLB is left for good (the router keeps
// no copy of a record the controller wrote).
func TestGoneMidMoveDeletesWhatTheMoveCreated(t *testing.T) {
	backendAnn := string(annotation.LoadBalancerBackend)
	first := utilt.NewService("web", utilt.WithAnnotation(backendAnn, "metal"))
	first.UID = "uid-web-1"
	e, f := startAWS(t, envOptions{versioned: true, classless: true}, *first)
	waitFor(t, 30*time.Second, "web served by metal", synced(e, t, "web", 1))

	// The move: security group, its rule and the NLB are made; the next
	// mutating call (the target group) and every later one fail.
	f.FailMutationsAfter(3)
	old := e.get(t, "web")
	old.Annotations[backendAnn] = "aws"
	if _, err := e.client.CoreV1().Services("default").Update(context.Background(), old, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the move's NLB made, its sync failed", func() error {
		if n := len(f.LoadBalancers()); n != 1 {
			return fmt.Errorf("%d NLBs", n)
		}
		for _, ev := range e.events(t, "web") {
			if strings.HasPrefix(ev, reasonSyncFailed) {
				return nil
			}
		}
		return fmt.Errorf("no failed sync yet; events %v", e.events(t, "web"))
	})

	e.deleteByHand(t, "web")
	again := utilt.NewService("web", utilt.WithAnnotation(backendAnn, "metal"))
	again.UID = "uid-web-2"
	e.create(t, again)
	f.ClearMutationFailures()
	waitFor(t, 30*time.Second, "the old Service's NLB deleted, the new one served by metal", func() error {
		if lbs := f.LoadBalancers(); len(lbs) != 0 {
			return fmt.Errorf("NLBs left: %v", nlbNames(lbs))
		}
		return synced(e, t, "web", 1)()
	})
}

func nlbNames(lbs []awsfake.LoadBalancerView) []string {
	out := make([]string, 0, len(lbs))
	for _, lb := range lbs {
		out = append(out, lb.Name)
	}
	return out
}

// TestGoneDuringMoveDeletesWhatTheMoveCreated (TestReloadTorture, a local
// run of session 63): the Service is deleted by hand and re-created while
// its move's ensure is in flight. The ensure succeeds, its status cannot
// be written (the Service is gone), and the copy the controller kept
// names only the backend it moved from: the old Service's NLB must still
// be deleted.
func TestGoneDuringMoveDeletesWhatTheMoveCreated(t *testing.T) {
	backendAnn := string(annotation.LoadBalancerBackend)
	first := utilt.NewService("web", utilt.WithAnnotation(backendAnn, "metal"))
	first.UID = "uid-web-1"
	e, f := startAWS(t, envOptions{versioned: true, classless: true}, *first)
	waitFor(t, 30*time.Second, "web served by metal", synced(e, t, "web", 1))

	again := utilt.NewService("web", utilt.WithAnnotation(backendAnn, "metal"))
	again.UID = "uid-web-2"
	replaced := make(chan error, 1)
	e.cloud.mu.Lock()
	e.cloud.during = func(*corev1.Service) {
		services := e.client.CoreV1().Services("default")
		cur, err := services.Get(context.Background(), "web", metav1.GetOptions{})
		if err == nil {
			cur.Finalizers = nil
			_, err = services.Update(context.Background(), cur, metav1.UpdateOptions{})
		}
		if err == nil {
			err = services.Delete(context.Background(), "web", metav1.DeleteOptions{})
		}
		if err == nil {
			_, err = services.Create(context.Background(), again.DeepCopy(), metav1.CreateOptions{})
		}
		replaced <- err
	}
	e.cloud.mu.Unlock()
	old := e.get(t, "web")
	old.Annotations[backendAnn] = "aws"
	if _, err := e.client.CoreV1().Services("default").Update(context.Background(), old, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-replaced:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the move's ensure never ran")
	}
	waitFor(t, 30*time.Second, "the old Service's NLB deleted, the new one served by metal", func() error {
		if lbs := f.LoadBalancers(); len(lbs) != 0 {
			return fmt.Errorf("NLBs left: %v", nlbNames(lbs))
		}
		if s := e.get(t, "web"); s.UID != again.UID {
			return fmt.Errorf("web is %s", s.UID)
		}
		return synced(e, t, "web", 1)()
	})
}
